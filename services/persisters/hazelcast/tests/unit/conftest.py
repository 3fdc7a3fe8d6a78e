"""The unit tests' settings come from what each test sets, never from the shell's FLUXGATE_HZ_*."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("FLUXGATE_HZ_"):
            monkeypatch.delenv(name)
    return monkeypatch
