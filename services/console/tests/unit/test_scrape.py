"""Each instance's state from its recorded answers, including one down and one answering garbage."""

from __future__ import annotations

import json

import httpx
from console_recorded import NOT_READY, READY, Services, metrics_text

from fluxgate_console.scrape import History, parse_metrics, readiness, root_cause, scrape_instance


async def test_a_ready_service_with_its_figures(services: Services) -> None:
    async with services.client() as client:
        state = await scrape_instance(client, "http://127.0.0.1:9101", now=1.7e9 + 600)
    assert (state.state, state.reason) == ("ready", "ready")
    assert state.total("fluxgate_dead_letters_total") == 120
    assert state.by_label("fluxgate_dead_letters_total", "reason") == {"PayloadError": 100, "InvalidReading": 20}
    assert state.uptime_s == 600


async def test_a_service_that_does_not_answer_is_down_with_why(services: Services) -> None:
    async with services.client() as client:
        state = await scrape_instance(client, "http://127.0.0.1:9102")
    assert state.state == "down"
    assert state.reason == "no answer: ConnectError: Connection refused (Connect call failed ('127.0.0.1', 9102))"
    assert state.samples == ()


def test_the_root_cause_of_every_failed_attempt_is_named() -> None:
    failed = OSError("All connection attempts failed")
    failed.__cause__ = ExceptionGroup(
        "multiple connection attempts failed",
        [ConnectionRefusedError(111, "Connect call failed ('::1', 9)"), OSError(101, "Network is unreachable")],
    )
    top = httpx.ConnectError(str(failed))
    top.__cause__ = failed
    assert root_cause(top) == "Connection refused (Connect call failed ('::1', 9)); Network is unreachable"


async def test_garbage_metrics_degrade_a_ready_service_and_say_so(services: Services) -> None:
    async with services.client() as client:
        state = await scrape_instance(client, "http://127.0.0.1:9105")
    assert state.state == "degraded"
    assert state.reason.startswith("/metrics unreadable") and state.metrics_error


async def test_not_ready_names_the_failing_checks(services: Services) -> None:
    async with services.client() as client:
        state = await scrape_instance(client, "http://127.0.0.1:9104")
    assert state.state == "degraded"
    assert state.reason == "not ready (HTTP 503): failing ready"
    assert state.total("fluxgate_sink_store_up") == 0  # the figures still come


def test_readiness_of_unreadable_answers() -> None:
    assert readiness(200, READY) == ("ready", "ready")
    assert readiness(503, NOT_READY)[0] == "degraded"
    state, reason = readiness(200, "<html>")
    assert state == "degraded" and "not JSON" in reason
    assert readiness(500, json.dumps([1, 2]))[1] == "not ready (HTTP 500)"


async def test_a_timeout_is_down() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(slow)) as client:
        state = await scrape_instance(client, "http://127.0.0.1:9999")
    assert state.state == "down" and "ReadTimeout" in state.reason


def test_parse_metrics_keeps_labels() -> None:
    samples = parse_metrics(metrics_text("device-status"))
    assert {(s.name, s.labels.get("status"), s.value) for s in samples} >= {
        ("fluxgate_status_devices", "ONLINE", 24.0),
        ("fluxgate_status_readings_total", None, 11880.0),
    }


def test_rates_over_the_window_and_across_a_restart() -> None:
    history = History(window_s=60)
    for at, value in [(0, 0), (30, 300), (60, 600), (90, 900)]:
        history.add("k", at, value)
    assert history.rate("k") == 10.0  # the points older than the window went
    history.add("k", 100, 50)  # the counter restarted at 0
    assert history.rate("k") is not None and history.rate("k") >= 0
    assert History(60).rate("none") is None
