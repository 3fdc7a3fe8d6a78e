import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from fluxgate_core.health import HealthServer
from fluxgate_core.settings import HttpSettings


@pytest.fixture
def server() -> Iterator[HealthServer]:
    state = {"kafka": True}
    health = HealthServer(HttpSettings(host="127.0.0.1", port=0), {"kafka": lambda: state["kafka"]})
    health.state = state  # type: ignore[attr-defined]
    yield health.start()
    health.stop()
    health.stop()  # safe twice


def get(server: HealthServer, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_liveness_readiness_and_metrics(server: HealthServer) -> None:
    assert get(server, "/healthz")[0] == 200
    assert get(server, "/readyz") == (200, b'{"ready": true, "checks": {"kafka": true}}')
    status, body = get(server, "/metrics")
    assert status == 200 and b"python_info" in body  # the process-wide registry (another test may register more)


def test_failing_and_raising_checks_make_it_unready(server: HealthServer) -> None:
    server.state["kafka"] = False  # type: ignore[attr-defined]
    server.add_check("broken", lambda: 1 / 0 == 0)
    status, body = get(server, "/readyz")
    assert status == 503
    assert json.loads(body)["checks"] == {"kafka": False, "broken": False}
    assert get(server, "/nope")[0] == 404


def test_each_reason_for_attention_is_a_failing_check_named_by_it() -> None:
    reasons = ["offsets 1-10 of sensors.readings/0 were lost before they were read"]
    health = HealthServer(HttpSettings(host="127.0.0.1", port=0), {"ready": lambda: True}, attention=lambda: reasons)
    health.start()
    try:
        status, body = get(health, "/readyz")
        assert status == 503
        assert json.loads(body) == {"ready": False, "checks": {"ready": True, reasons[0]: False}}
        reasons.clear()  # acknowledged, or the alert's time is over
        assert get(health, "/readyz")[0] == 200
    finally:
        health.stop()


def test_attention_that_raises_is_a_failing_check() -> None:
    health = HealthServer(HttpSettings(host="127.0.0.1", port=0), {"ready": lambda: True}, attention=lambda: [1 / 0])
    assert health.readiness() == {"ready": True, "attention": False}


def test_metrics_say_readiness_as_of_the_scrape(server: HealthServer) -> None:
    """Prometheus reads only /metrics: an alert on a service that runs but is not ready needs it there."""
    body = get(server, "/metrics")[1].decode()
    assert "fluxgate_ready 1.0" in body and 'fluxgate_ready_check{check="kafka"} 1.0' in body

    server.state["kafka"] = False  # type: ignore[attr-defined]

    body = get(server, "/metrics")[1].decode()
    assert "fluxgate_ready 0.0" in body and 'fluxgate_ready_check{check="kafka"} 0.0' in body
