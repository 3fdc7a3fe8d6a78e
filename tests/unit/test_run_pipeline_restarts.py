"""make run starts a service that died again, after a back-off, and counts it; real child
processes (short Python programs), no servers."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from run_pipeline import RESTART_BACKOFF_MAX_S, TOPICS, Pipeline, restart_backoff, status_line

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
