"""The flags every persister shares, as settings overrides."""

from __future__ import annotations

from fluxgate_sink.cli import overrides


def test_no_flags_override_nothing() -> None:
    assert overrides(False, None) == {}


def test_flags_override_the_sink_group_only() -> None:
    assert overrides(True, "rebuild-1") == {"sink": {"from_beginning": True, "group_id": "rebuild-1"}}
