"""The real Elasticsearch node: ready, survives a crash with its data, and a throw-away node
with a one-slot write queue really answers 429.

Uses the root conftest's session fixture ``elasticsearch`` (starts it if needed, ~7-10 s,
and leaves it running for the next suite).
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from fluxgate_stack import Stack, kill, probes, start
from fluxgate_stack.servers.elasticsearch import HEALTH_PATH, throwaway_node

pytestmark = pytest.mark.integration


@pytest.fixture
def index() -> str:
    return f"stack-test-{uuid.uuid4().hex[:10]}"


def test_up_and_ready(elasticsearch: str) -> None:
    health = httpx.get(elasticsearch + HEALTH_PATH, timeout=10).json()
    assert health["status"] in ("green", "yellow") and health["number_of_nodes"] == 1
    [status] = [s for s in Stack().status() if s.name == "elasticsearch"]
    assert status.state in ("ready", "external")
    settings = httpx.get(f"{elasticsearch}/_nodes/_local/settings", timeout=10).json()
    [node] = settings["nodes"].values()
    assert node["settings"]["discovery"]["type"] == "single-node"
    assert node["settings"]["cluster"]["routing"]["allocation"]["disk"]["threshold_enabled"] == "false"


@pytest.mark.serial(kills="elasticsearch")
def test_kill_then_start_keeps_the_data(elasticsearch: str, index: str) -> None:
    doc = httpx.put(f"{elasticsearch}/{index}/_doc/d1", json={"value": 21.5}, timeout=10)
    assert doc.status_code == 201, doc.text  # acknowledged means fsynced (translog durability "request")
    kill("elasticsearch")
    assert not probes.http_ok(elasticsearch + HEALTH_PATH)
    assert start("elasticsearch").elasticsearch_url == elasticsearch
    found = httpx.get(f"{elasticsearch}/{index}/_doc/d1", timeout=10).json()
    assert found["found"] and found["_source"] == {"value": 21.5}
    httpx.delete(f"{elasticsearch}/{index}", timeout=10)


def test_throwaway_node_with_a_tiny_write_queue_answers_429(index: str) -> None:
    tiny = {"thread_pool.write.size": "1", "thread_pool.write.queue_size": "1"}
    with throwaway_node(tiny) as url:
        assert url != Stack().endpoints().elasticsearch_url
        created = httpx.put(f"{url}/{index}", json={"settings": {"number_of_shards": 1}}, timeout=30)
        assert created.status_code == 200, created.text
        with ThreadPoolExecutor(max_workers=12) as pool:
            rejections = sum(pool.map(lambda n: _bulk_rejections(url, index, n), range(48)))
        assert rejections > 0, "no es_rejected_execution_exception with a one-slot write queue"
    assert not probes.http_ok(url + HEALTH_PATH)  # stopped on exit


def _bulk_rejections(url: str, index: str, batch: int) -> int:
    """Bulk-index 200 documents; the number of 429 es_rejected_execution_exception answers."""
    lines = []
    for n in range(200):
        lines += [json.dumps({"index": {"_id": f"{batch}-{n}"}}), json.dumps({"value": n})]
    response = httpx.post(
        f"{url}/{index}/_bulk",
        content="\n".join(lines) + "\n",
        headers={"Content-Type": "application/x-ndjson"},
        timeout=60,
    )
    if response.status_code == 429:
        return int("es_rejected_execution_exception" in response.text)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = [item["index"] for item in response.json()["items"]]
    return sum(
        1 for item in items if item["status"] == 429 and item["error"]["type"] == "es_rejected_execution_exception"
    )
