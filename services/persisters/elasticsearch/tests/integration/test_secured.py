"""``fluxgate-es-persister`` against Elasticsearch with security on (``elasticsearch-secured``):
HTTPS from the stack's CA, its own user (password from a file) held to its role, and the
aggregates of a fresh topic in daily indices, as against the open node; its retention sweep
works with the role too."""

from __future__ import annotations

import signal
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from elasticsearch import Elasticsearch
from fluxgate_testing import ServiceProcess, free_port, unique_topic
from fluxgate_testing.aggregates import temperature_aggregate

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroEncoder

pytestmark = pytest.mark.integration


@pytest.fixture
def target(secured_elasticsearch: Any) -> Iterator[str]:
    """An index family of the test's own inside the persister role's ``temperatures*``."""
    name = f"temperatures_{uuid.uuid4().hex[:10]}"
    yield name
    with admin(secured_elasticsearch) as es:
        es.indices.delete(index=f"{name}*", ignore_unavailable=True, expand_wildcards="all")
        es.options(ignore_status=404).indices.delete_index_template(name=name)


def admin(node: Any) -> Elasticsearch:
    return Elasticsearch(node.url, basic_auth=node.user("admin"), ca_certs=str(node.ca_file), request_timeout=30)


def produce(stack: Any, registry_client: Any, topic: str, records: list[dict[str, Any]]) -> None:
    encoder = AvroEncoder.registered(
        registry_client, topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for record in records:
        producer.produce(topic, key=record["device_id"].encode(), value=encoder.encode(record))
    assert producer.flush(10) == 0


def count(es: Elasticsearch, index: str, expected: int, process: ServiceProcess, timeout: float = 60) -> int:
    deadline, seen = time.monotonic() + timeout, 0
    while time.monotonic() < deadline:
        assert process.running, f"the persister exited:\n{process.log_tail()}"
        if es.indices.exists_alias(name=index):
            es.indices.refresh(index=index)
            seen = int(es.count(index=index)["count"])
            if seen >= expected:
                return seen
        time.sleep(0.3)
    raise AssertionError(f"{seen} of {expected} documents after {timeout}s:\n{process.log_tail()}")


def test_aggregates_reach_the_secured_node_through_tls_as_the_persister_user(
    stack: Any, registry_client: Any, secured_elasticsearch: Any, target: str, tmp_path: Path
) -> None:
    topic = unique_topic("es.secured", stack.bootstrap)
    start = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    records = [
        temperature_aggregate(f"d{n}", start + timedelta(minutes=n), count=2, min=20.0, max=22.0, mean=21.0)
        for n in range(20)
    ]
    produce(stack, registry_client, topic, records)
    port = free_port()
    env = secured_elasticsearch.env("FLUXGATE_ES_", "es-persister") | {
        "FLUXGATE_ES_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
        "FLUXGATE_ES_REGISTRY__URL": stack.registry_url,
        "FLUXGATE_ES_HTTP__HOST": "127.0.0.1",
        "FLUXGATE_ES_HTTP__PORT": str(port),
        "FLUXGATE_ES_SINK__KCQL": f"INSERT INTO {target} SELECT * FROM {topic}"
        " PK device_id, metric, window_start WITHINDEXSUFFIX=-{YYYY.MM.dd}",
        "FLUXGATE_ES_SINK__GROUP_ID": f"es-secured-{uuid.uuid4().hex[:8]}",
        "FLUXGATE_ES_SINK__BATCH_AGE_MS": "100",
        "FLUXGATE_ES_SINK__DEADLETTER_TOPIC": f"{topic}.dlq",
    }
    assert "FLUXGATE_ES_ELASTICSEARCH__PASSWORD" not in env  # the password comes from its 0600 file
    process = ServiceProcess(
        [sys.executable, "-m", "fluxgate_es_persister"],
        env,
        health_port=port,
        log_path=tmp_path / "persister.log",
        isolate_prefix="FLUXGATE_ES_",
    )
    process.start(timeout=60)
    try:
        with admin(secured_elasticsearch) as es:
            assert count(es, target, len(records), process) == len(records)
            assert es.count(index=f"{target}-2026.11.25")["count"] == len(records)
        assert process.signal(signal.SIGTERM) == 0
    finally:
        if process.running:
            process.kill()
    said = process.log_text()
    _username, password = secured_elasticsearch.user("es-persister")
    assert password not in said
    # The retention sweep listed the family's indices with the role's rights (a 403 is logged).
    assert "retention.failed" not in said and "security_exception" not in said, said[-3000:]
