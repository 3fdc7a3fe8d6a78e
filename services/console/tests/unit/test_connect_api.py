"""The Kafka Connect REST API in the shapes Kafka Connect returns (recorded responses, see
tests/recorded/connect/README.md), each service a connector and each instance a task."""

from __future__ import annotations

from typing import Any

import pytest
from console_recorded import RecordedKafka, Services, recorded_connect
from starlette.testclient import TestClient

from fluxgate_console.deadletters import DeadLetterBook
from fluxgate_console.refresh import Console
from fluxgate_console.settings import ConsoleSettings, DeadLetterSettings
from fluxgate_console.web import Web

MAPS = {"config"}  # objects whose keys are free (a connector's config); everything else has fixed keys


def skeleton(value: Any, key: str = "", top_map: bool = False) -> Any:
    """The shape of a JSON value: fixed keys kept, free-keyed maps reduced to their values' shapes."""
    if isinstance(value, dict):
        if top_map or key in MAPS:
            return {"*": sorted({repr(skeleton(v)) for v in value.values()})}
        return {k: skeleton(v, k) for k, v in value.items() if k != "trace"}  # trace: only on FAILED
    if isinstance(value, list):
        return sorted({repr(skeleton(v)) for v in value})
    return type(value).__name__


@pytest.fixture
async def client(settings: ConsoleSettings, kafka: RecordedKafka, services: Services) -> TestClient:
    console = Console(settings, kafka, DeadLetterBook(DeadLetterSettings(topics=[])), client=services.client())
    await console.refresh()
    return TestClient(Web(console, None, lambda: "cluster-1").app())


@pytest.mark.parametrize(
    ("path", "recorded", "top_map"),
    [
        ("/connect/", "root", False),
        ("/connect/connectors", "connectors", False),
        ("/connect/connectors?expand=status", "connectors-expand-status", True),
        ("/connect/connectors?expand=info", "connectors-expand-info", True),
        ("/connect/connectors/aggregator", "connector", False),
        ("/connect/connectors/aggregator/status", "connector-status", False),
        ("/connect/connectors/aggregator/config", "connector-config", True),
        ("/connect/connectors/aggregator/tasks", "connector-tasks", False),
        ("/connect/connector-plugins", "connector-plugins", False),
    ],
)
def test_shapes_as_kafka_connect_returns_them(client: TestClient, path: str, recorded: str, top_map: bool) -> None:
    reply = client.get(path)
    assert reply.status_code == 200
    assert skeleton(reply.json(), top_map=top_map) == skeleton(recorded_connect(recorded), top_map=top_map)


def test_unknown_connector_is_connects_404(client: TestClient) -> None:
    reply = client.get("/connect/connectors/missing/status")
    assert reply.status_code == 404
    assert reply.json() == recorded_connect("connector-not-found")


def test_states_and_traces(client: TestClient) -> None:
    statuses = {name: entry["status"] for name, entry in client.get("/connect/connectors?expand=status").json().items()}
    assert statuses["mqtt-proxy"]["type"] == "source" and statuses["aggregator"]["type"] == "sink"
    assert statuses["aggregator"]["tasks"] == [{"id": 0, "state": "RUNNING", "worker_id": "127.0.0.1:9103"}]
    coap = statuses["coap-ingest"]
    assert coap["connector"]["state"] == "FAILED" and "Connection refused" in coap["connector"]["trace"]
    assert coap["tasks"][0]["state"] == "FAILED" and "Connection refused" in coap["tasks"][0]["trace"]
    assert statuses["es-persister"]["tasks"][0]["state"] == "PAUSED"  # waiting for its store
    scylla = statuses["scylla-persister"]["tasks"][0]
    assert scylla["state"] == "FAILED" and scylla["trace"].startswith("/metrics unreadable")
    config = client.get("/connect/connectors/es-persister/config").json()
    assert config["topics"] == "temperatures.aggregated" and config["tasks.max"] == "1"
    assert all(isinstance(v, str) for v in config.values())
