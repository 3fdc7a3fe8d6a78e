"""A running JVM's JIT mode and what asks for it: a full-JIT server (a benchmark's) serves a
test that asks for a quick start; a quick-start one is restarted for a benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fluxgate_stack import process
from fluxgate_stack.process import PidRecord
from fluxgate_stack.servers.elasticsearch import ElasticsearchServer
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.stack import Stack


def server(tmp_path: Path, quick: bool) -> ElasticsearchServer:
    return ElasticsearchServer(StackSettings(home=tmp_path, jvm_quick_start=quick, es_java_home=tmp_path))


def test_a_quick_start_is_served_by_a_full_jit_jvm_and_not_the_other_way(tmp_path: Path) -> None:
    quick, full = server(tmp_path, quick=True), server(tmp_path, quick=False)
    assert quick.fingerprint() != full.fingerprint()
    assert quick.fingerprints_served() == {quick.fingerprint(), full.fingerprint()}
    assert full.fingerprints_served() == {full.fingerprint()}
    assert quick.settings.jvm_quick_start  # asking changed nothing of the server's own settings


@pytest.mark.parametrize(("running_quick", "asked_quick", "restarted"), [
    (False, True, False),  # a test beside a benchmark: the benchmark's servers stay
    (True, False, True),  # a benchmark after the tests: its figures must not be C1's
    (True, True, False),
])  # fmt: skip
def test_up_restarts_a_running_jvm_only_for_what_it_cannot_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, running_quick: bool, asked_quick: bool, restarted: bool
) -> None:
    running = PidRecord(12345, 1, ("java",), server(tmp_path, running_quick).fingerprint())
    stopped: list[str] = []
    monkeypatch.setattr(process, "read_pidfile", lambda path: running)
    monkeypatch.setattr(process, "is_alive", lambda record: True)
    asked = server(tmp_path, asked_quick)
    stack = Stack(asked.settings)

    def stop(server: Any) -> None:
        stopped.append(server.name)
        raise RuntimeError("stopped: the test ends here")

    monkeypatch.setattr(stack, "_stop", stop)
    if restarted:
        with pytest.raises(RuntimeError):
            stack._launch(asked)
        assert stopped == ["elasticsearch"]
    else:
        assert stack._launch(asked) is running and stopped == []
