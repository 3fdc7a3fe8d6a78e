"""A settings test reads only what it sets: a developer's shell may export a service's variables
(a worktree's own ports, a store it points at), and those would change what the test loads."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from _pytest.fixtures import FixtureFunctionDefinition


def drop_env(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """Hide every variable under ``prefix`` for the rest of the test.

    Settings classes match names whatever their case, so a lower-case name is hidden too."""
    for name in list(os.environ):
        if name.upper().startswith(prefix):
            monkeypatch.delenv(name)


def clean_env_fixture(prefix: str) -> FixtureFunctionDefinition:
    """An autouse fixture that drops ``prefix``'s variables and hands on the monkeypatch, for the
    test to set its own: ``clean_env = clean_env_fixture("FLUXGATE_ES_")`` in a test module or
    conftest (pytest names the fixture after the variable it is assigned to)."""

    @pytest.fixture(autouse=True)
    def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
        drop_env(monkeypatch, prefix)
        return monkeypatch

    return clean_env
