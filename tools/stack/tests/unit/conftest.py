"""Unit tests run as root on CI with folders under pytest's mode-700 temporary root, which
the unprivileged user cannot enter: Elasticsearch's and Cassandra's files would move to
/var/lib/fluxgate-stack/<id>, a new folder per run. They go to the test's own folder instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluxgate_stack import users


@pytest.fixture(autouse=True)
def _unprivileged_root_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(users, "UNPRIVILEGED_ROOT", tmp_path / "var-lib-fluxgate-stack")
