"""The stack's real Prometheus (Debian's): it loads the alerts the charts ship, scrapes the
targets a run names with their ``fluxgate_service`` label, and one alert really fires when a
persister it scrapes is killed."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fluxgate_testing import ServiceProcess, free_port

from fluxgate_stack import Stack
from fluxgate_stack.servers.prometheus import RULES, remove_targets, write_targets

pytestmark = pytest.mark.integration
SCRAPE_S = 5.0  # the stack's default interval


@pytest.fixture(scope="module")
def prometheus() -> str:
    Stack().up(["prometheus"])
    return f"http://127.0.0.1:{Stack().settings.prometheus_port}"


@pytest.fixture
def run_name() -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:8]}"
    yield name
    remove_targets(name)


def api(prometheus: str, path: str, **params: str) -> Any:
    reply = httpx.get(f"{prometheus}/api/v1/{path}", params=params, timeout=10)
    reply.raise_for_status()
    return reply.json()["data"]


def eventually(check: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"not within {timeout:g}s: {what}"
        time.sleep(1)
    return found


def test_it_evaluates_the_alerts_the_charts_ship(prometheus: str) -> None:
    shipped = yaml.safe_load((Stack().settings.local_dir.parent / RULES).read_text())
    loaded = api(prometheus, "rules")["groups"]
    assert {r["name"] for g in loaded for r in g["rules"]} == {
        r["alert"] for g in shipped["groups"] for r in g["rules"]
    }


def persister(tmp_path: Path) -> ServiceProcess:
    port = free_port()
    return ServiceProcess(
        [sys.executable, "-m", "fluxgate_hazelcast_persister"],
        {"FLUXGATE_HZ_HTTP__PORT": str(port), "FLUXGATE_HZ_HTTP__HOST": "127.0.0.1"},
        health_port=port,
        log_path=tmp_path / "persister.log",
        isolate_prefix="FLUXGATE_HZ_",
    )


def test_a_killed_persister_fires_service_down(prometheus: str, run_name: str, tmp_path: Path) -> None:
    """The rule as shipped (2 minutes down), on a real persister: scraped with its label and
    readiness first, then SIGKILLed as a crash would, then the alert firing, named by it."""
    service = f"hazelcast-persister-{run_name}"
    process = persister(tmp_path).start()
    try:
        write_targets(run_name, {service: f"127.0.0.1:{process.health_port}"})
        selector = f'{{fluxgate_service="{service}"}}'
        eventually(lambda: api(prometheus, "query", query=f"fluxgate_ready{selector} == 1")["result"], "ready", 60)
        metadata = api(prometheus, "targets/metadata", match_target=selector)
        assert {"fluxgate_sink_store_up", "fluxgate_sink_consumer_lag"} <= {m["metric"] for m in metadata}
    finally:
        process.kill()

    def firing() -> list[Any]:
        alerts = api(prometheus, "alerts")["alerts"]
        return [a for a in alerts if a["labels"].get("fluxgate_service") == service and a["state"] == "firing"]

    [alert] = eventually(firing, "FluxgateServiceDown firing", timeout=120 + 6 * SCRAPE_S + 30)
    assert alert["labels"]["alertname"] == "FluxgateServiceDown"
    assert alert["annotations"]["runbook_url"] == "docs/runbooks/FluxgateServiceDown.md"
