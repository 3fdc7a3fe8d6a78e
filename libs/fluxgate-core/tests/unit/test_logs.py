"""Structured logs: one line per event, logfmt or JSON, with the service and level filtering."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from fluxgate_core.logs import configure_logging
from fluxgate_core.settings import LogSettings


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()


def test_json_lines_carry_service_level_event_and_fields(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("mqtt-proxy", LogSettings(level="INFO", json_output=True))
    log = structlog.get_logger("test")
    log.info("message.dead_lettered", topic="sensors/d1/temperature", partition=2)
    log.debug("too.chatty")
    [line] = capsys.readouterr().err.splitlines()
    event = json.loads(line)
    assert event["event"] == "message.dead_lettered" and event["level"] == "info"
    assert (event["service"], event["topic"], event["partition"]) == ("mqtt-proxy", "sensors/d1/temperature", 2)
    assert event["timestamp"].endswith("Z")


def test_logfmt_starts_with_time_level_event(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("coap-ingest", LogSettings(level="DEBUG", json_output=False))
    structlog.get_logger("test").warning("notification.rejected", uri="coap://h/x y")
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("timestamp=")
    assert " level=warning event=notification.rejected " in line
    assert 'uri="coap://h/x y"' in line and "service=coap-ingest" in line


def test_standard_library_records_come_out_in_the_same_format() -> None:
    """aiokafka, faust, gmqtt, aiocoap and the drivers log through the standard library."""
    configure_logging("device-status", LogSettings(level="INFO", json_output=False))
    record = logging.LogRecord("aiokafka.consumer", logging.WARNING, __file__, 1, "fetch %s failed", ("p0",), None)
    lines = {handler.format(record) for handler in logging.getLogger().handlers}
    assert lines, "no root handler"
    for line in lines:
        assert line.startswith("timestamp=")
        assert ' level=warning event="fetch p0 failed" ' in line
        assert "logger=aiokafka.consumer" in line and "service=device-status" in line
