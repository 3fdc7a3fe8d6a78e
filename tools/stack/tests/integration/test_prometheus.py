"""The stack's real Prometheus (Debian's): it loads the alerts the charts ship, scrapes the
targets a run names with their ``fluxgate_service`` label. That one of them is raised for a
stopped persister of `make run` is tests/e2e/test_run_pipeline.py's; that it fires after its
2 minutes, tests/alerts/rules_test.yaml's (promtool, the same rules file)."""

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


def test_a_run_s_target_is_scraped_with_its_service_label(prometheus: str, run_name: str, tmp_path: Path) -> None:
    """A real persister named in a run's targets: scraped with its ``fluxgate_service`` label,
    ready, and exporting the metrics the store and lag alerts read."""
    service = f"hazelcast-persister-{run_name}"
    port = free_port()
    with ServiceProcess(
        [sys.executable, "-m", "fluxgate_hazelcast_persister"],
        {"FLUXGATE_HZ_HTTP__PORT": str(port), "FLUXGATE_HZ_HTTP__HOST": "127.0.0.1"},
        health_port=port,
        log_path=tmp_path / "persister.log",
        isolate_prefix="FLUXGATE_HZ_",
    ) as process:
        process.start()
        write_targets(run_name, {service: f"127.0.0.1:{port}"})
        selector = f'{{fluxgate_service="{service}"}}'
        eventually(lambda: api(prometheus, "query", query=f"fluxgate_ready{selector} == 1")["result"], "ready", 60)
        metadata = api(prometheus, "targets/metadata", match_target=selector)
        assert {"fluxgate_sink_store_up", "fluxgate_sink_consumer_lag"} <= {m["metric"] for m in metadata}
