"""make run starts a service that died again, after a back-off, and counts it; real child
processes (short Python programs), no servers."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from run_pipeline import (
    RESTART_BACKOFF_MAX_S,
    TOPICS,
    Pipeline,
    restart_backoff,
    status_line,
    stop_child,
    take_interrupts,
)

DIES = [sys.executable, "-c", "import sys; print('no broker'); sys.exit(3)"]
LIVES = [sys.executable, "-c", "import time; time.sleep(60)"]


def wait_dead(pipeline: Pipeline, name: str) -> None:
    deadline = time.monotonic() + 30
    while name not in pipeline.dead():
        assert time.monotonic() < deadline, f"{name} did not exit"
        time.sleep(0.05)


def test_the_backoff_doubles_from_one_second_to_a_minute() -> None:
    assert [restart_backoff(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert RESTART_BACKOFF_MAX_S == 60


def test_a_dead_service_is_started_again_once_its_backoff_has_passed(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    pipeline.start("aggregator", DIES)
    pipeline.start("mqtt-proxy", LIVES)
    try:
        wait_dead(pipeline, "aggregator")
        first = pipeline.process("aggregator")
        assert pipeline.revive(now=100.0) == []  # seen dead now: it waits its back-off (1 s)
        assert pipeline.revive(now=100.5) == []
        assert pipeline.revive(now=101.0) == ["aggregator"]
        assert pipeline.process("aggregator") is not first
        assert pipeline.restarts == {"aggregator": 1}
        wait_dead(pipeline, "aggregator")
        assert pipeline.revive(now=200.0) == []  # the second restart waits 2 s
        assert pipeline.revive(now=201.9) == []
        assert pipeline.revive(now=202.0) == ["aggregator"]
        assert pipeline.restarts == {"aggregator": 2}
        assert "mqtt-proxy" not in pipeline.dead()
        assert (tmp_path / "aggregator.log").read_text().count("no broker") >= 2
    finally:
        pipeline.stop_rest()


def test_the_simulator_is_not_restarted(tmp_path: Path) -> None:
    pipeline = Pipeline(tmp_path)
    pipeline.start("simulator", DIES)
    wait_dead(pipeline, "simulator")
    assert pipeline.revive(now=0.0) == [] and pipeline.revive(now=1000.0) == []
    assert pipeline.restarts == {}


def test_the_status_line_counts_each_service_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    arrived = dict.fromkeys(TOPICS, 0)
    rates = dict.fromkeys(arrived, 0.0)
    line = status_line(5.0, arrived, rates, {}, {}, [], {"aggregator": 2, "es-persister": 1})
    assert line.endswith("restarted: aggregator×2,es-persister×1")


class InterruptedOnceTaken:
    """A child's waitpid lock that receives a Ctrl-C the moment it is taken, as a KeyboardInterrupt
    between ``Popen.poll``'s ``acquire`` and its ``try`` would: the window a landing run hit."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        taken: bool = self.lock.acquire(blocking, timeout)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # delivered by now, to whichever thread takes it; handled before returning
        return taken

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.mark.parametrize("asks", ["dead", "running"])
def test_a_ctrl_c_while_a_child_is_polled_waits_until_the_poll_is_done(tmp_path: Path, asks: str) -> None:
    pipeline = Pipeline(tmp_path)
    pipeline.start("mqtt-proxy", LIVES)
    child = pipeline.process("mqtt-proxy")
    lock = child._waitpid_lock  # type: ignore[attr-defined]
    child._waitpid_lock = InterruptedOnceTaken(lock)  # type: ignore[attr-defined]
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    take_interrupts()  # as run_pipeline's, the soak's and the fleet bench's mains do
    # A thread besides the main one, as librdkafka's are in a run: a process's signal goes to
    # whichever thread does not block it, so masking it in the main thread defers nothing.
    done = threading.Event()
    threading.Thread(target=done.wait, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pipeline.dead() if asks == "dead" else pipeline.running("mqtt-proxy")
    finally:
        done.set()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        child._waitpid_lock = lock  # type: ignore[attr-defined]
    # Taken and never given back before: stop_child's wait() then blocked for ever.
    left_taken = not lock.acquire(False)
    lock.release()  # given back either way, so the child can be stopped
    assert stop_child(child) == -signal.SIGTERM
    assert not left_taken, "the interrupt left the child's waitpid lock taken"
