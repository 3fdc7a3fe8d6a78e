"""make run's 5-second line: rich renders it in colour on a terminal, as plain text in a pipe."""

from __future__ import annotations

import re

import pytest
import run_pipeline
from run_pipeline import TOPICS, status_line

ARRIVED = {"sensors.readings": 500, "sensors.deadletter": 3, "temperatures.aggregated": 2, "temperatures.late": 0}
RATES = {topic: 2.0 for topic in TOPICS}


def test_in_a_pipe_the_line_is_plain_text_with_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    line = status_line(12.0, ARRIVED, RATES, {"elasticsearch": 2}, {"ONLINE": 25}, ["aggregator"])
    assert "\x1b[" not in line
    assert line == (
        "[    12s] sensors.readings +500 (2/s)  sensors.deadletter +3 (2/s)  temperatures.aggregated +2 (2/s)"
        "  temperatures.late +0 (2/s)  elasticsearch: 2  devices ONLINE: 25  DOWN: aggregator"
    )


def test_on_a_terminal_dead_letters_are_amber_and_a_dead_service_red(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    line = status_line(12.0, ARRIVED, RATES, {}, {}, ["aggregator"])
    plain = re.sub(r"\x1b\[[0-9;]*m", "", line)
    assert plain.startswith("[    12s] sensors.readings +500") and plain.endswith("DOWN: aggregator")
    assert "\x1b[33m+3\x1b[0m" in line  # sensors.deadletter's arrivals in yellow
    assert "\x1b[32m+500\x1b[0m" in line  # readings in green
    assert "\x1b[1;31m  DOWN: aggregator" in line
    assert run_pipeline.WARN_TOPICS == ("sensors.deadletter", "temperatures.late")
