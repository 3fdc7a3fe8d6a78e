"""The unit tests' settings come from what each test sets, never from the shell's FLUXGATE_HZ_*."""

from __future__ import annotations

from fluxgate_testing.env import clean_env_fixture

clean_env = clean_env_fixture("FLUXGATE_HZ_")
