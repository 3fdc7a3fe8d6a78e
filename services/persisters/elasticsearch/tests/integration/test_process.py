"""``fluxgate-es-persister`` as a process: Avro aggregates on a fresh topic into daily indices."""

from __future__ import annotations

import json
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
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
def topic(stack: Any) -> str:
    return unique_topic("es.aggregates", stack.bootstrap)


@pytest.fixture
def sync_es(es_url: str, target: str) -> Iterator[Elasticsearch]:
    client = Elasticsearch(es_url, request_timeout=30)
    yield client
    client.indices.delete(index=f"{target}*", ignore_unavailable=True, expand_wildcards="all")
    client.options(ignore_status=404).indices.delete_index_template(name=target)
    client.close()


@pytest.fixture
def persister(stack: Any, es_url: str, topic: str, target: str, tmp_path: Path) -> Callable[..., ServiceProcess]:
    processes: list[ServiceProcess] = []

    def start(*args: str, **env: str) -> ServiceProcess:
        port = free_port()
        kcql = (
            f"INSERT INTO {target} SELECT * FROM {topic} PK device_id, metric, window_start"
            " WITHINDEXSUFFIX=-{YYYY.MM.dd}"
        )
        variables = {
            "FLUXGATE_ES_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
            "FLUXGATE_ES_REGISTRY__URL": stack.registry_url,
            "FLUXGATE_ES_ELASTICSEARCH__HOSTS": f'["{es_url}"]',
            "FLUXGATE_ES_HTTP__HOST": "127.0.0.1",
            "FLUXGATE_ES_HTTP__PORT": str(port),
            "FLUXGATE_ES_SINK__KCQL": kcql,
            "FLUXGATE_ES_SINK__GROUP_ID": f"es-test-{uuid.uuid4().hex[:8]}",
            "FLUXGATE_ES_SINK__BATCH_AGE_MS": "100",
            "FLUXGATE_ES_SINK__DEADLETTER_TOPIC": f"{topic}.dlq",
            **env,
        }
        argv = [sys.executable, "-m", "fluxgate_es_persister", *args]
        process = ServiceProcess(
            argv, variables, health_port=port, log_path=tmp_path / "persister.log", isolate_prefix="FLUXGATE_ES_"
        )
        processes.append(process.start(timeout=60))
        return process

    yield start  # type: ignore[misc]
    for process in processes:
        if process.running:
            process.kill()


def produce(stack: Any, registry_client: Any, topic: str, records: list[dict[str, Any]]) -> None:
    encoder = AvroEncoder.registered(
        registry_client, topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for record in records:
        producer.produce(topic, key=record["device_id"].encode(), value=encoder.encode(record))
    assert producer.flush(10) == 0


def aggregate(device: str, start: datetime) -> dict[str, Any]:
    return temperature_aggregate(
        device, start, count=2, min=20.0, max=22.0, mean=21.0, stddev=1.0, unit=None,
        first_event_time=start + timedelta(seconds=1), last_event_time=start + timedelta(seconds=50),
    )  # fmt: skip


def wait_for_count(es: Elasticsearch, index: str, expected: int, process: ServiceProcess, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        assert process.running, f"the persister exited:\n{process.log_tail()}"
        if es.indices.exists_alias(name=index) or es.indices.exists(index=index):
            es.indices.refresh(index=index)
            count = int(es.count(index=index)["count"])
            if count >= expected:
                return count
        time.sleep(0.3)
    raise AssertionError(f"{count} of {expected} documents after {timeout}s:\n{process.log_tail()}")


def test_aggregates_either_side_of_midnight_land_in_two_daily_indices(
    stack: Any,
    registry_client: Any,
    topic: str,
    target: str,
    sync_es: Elasticsearch,
    persister: Callable[..., ServiceProcess],
) -> None:
    late = datetime(2023, 7, 9, 23, 59, 30, tzinfo=UTC)
    early = datetime(2023, 7, 10, 0, 0, 30, tzinfo=UTC)
    records = [aggregate(f"d{n}", when) for n in range(10) for when in (late, early)]
    produce(stack, registry_client, topic, records)
    process = persister()
    assert wait_for_count(sync_es, target, len(records), process) == len(records)
    assert sync_es.count(index=f"{target}-2023.07.09")["count"] == 10
    assert sync_es.count(index=f"{target}-2023.07.10")["count"] == 10
    assert process.signal(signal.SIGTERM) == 0

    # Replayed from the beginning by a new process: same ids, nothing duplicated.
    again = persister("--from-beginning")
    produce(stack, registry_client, topic, [aggregate("d99", early)])
    assert wait_for_count(sync_es, target, len(records) + 1, again) == len(records) + 1
    time.sleep(1.0)
    sync_es.indices.refresh(index=target)
    assert sync_es.count(index=target)["count"] == len(records) + 1
    assert again.signal(signal.SIGTERM) == 0


def test_a_bad_setting_exits_2_naming_the_variable(tmp_path: Path) -> None:
    port = free_port()
    process = ServiceProcess(
        [sys.executable, "-m", "fluxgate_es_persister"],
        {"FLUXGATE_ES_RETENTION__ACTION": "archive", "FLUXGATE_ES_HTTP__PORT": str(port)},
        health_port=port,
        log_path=tmp_path / "bad.log",
        isolate_prefix="FLUXGATE_ES_",
    )
    process.start(wait_ready=False)
    assert process.wait(30) == 2
    assert "FLUXGATE_ES_RETENTION__ACTION" in process.log_text()


def produce_json(stack: Any, topic: str, values: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """``values`` as bare JSON (JsonConverter with schemas.enable=false); their (partition, offset)."""
    delivered: list[tuple[int, int]] = []

    def done(error: Any, message: Any) -> None:
        assert error is None, error
        delivered.append((message.partition(), message.offset()))

    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=json.dumps(value).encode(), on_delivery=done)
    assert producer.flush(30) == 0
    return delivered


def wait_for_version(
    es: Elasticsearch, index: str, doc_id: str, version: int, process: ServiceProcess, timeout: float = 90
) -> dict[str, Any]:
    """The document once written ``version`` times (a rewrite of the same _id counts up)."""
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        assert process.running, f"the persister exited:\n{process.log_tail()}"
        # 404: not written yet; 503: the index just made, its shard still starting.
        found = dict(es.options(ignore_status=(404, 503), max_retries=0).get(index=index, id=doc_id))
        if found.get("found") and found["_version"] >= version:
            return found
        time.sleep(0.3)
    raise AssertionError(f"{doc_id} not at version {version} after {timeout}s ({found}):\n{process.log_tail()}")


def test_a_record_not_ours_gets_stream_reactors_id_and_a_replay_overwrites_it(
    stack: Any, topic: str, target: str, sync_es: Elasticsearch, persister: Callable[..., ServiceProcess]
) -> None:
    # What fluxgate connect runs for a Stream-Reactor Elastic config over a JSON topic of any records.
    env = {
        "FLUXGATE_ES_SINK__KCQL": f"INSERT INTO {target} SELECT * FROM {topic}",
        "FLUXGATE_ES_SINK__DOCUMENT_ID": "stream-reactor",
        "FLUXGATE_ES_SINK__VALUE_FORMAT": "json",
        "FLUXGATE_ES_SINK__VALUE_SCHEMAS_ENABLE": "false",
    }
    value = {"sensor": "x", "value": 1}
    ((partition, offset),) = produce_json(stack, topic, [value])
    doc_id = f"{topic}-{partition}-{offset}"  # ElasticJsonWriter.autoGenId, pk.separator's default '-'
    process = persister(**env)
    first = wait_for_version(sync_es, target, doc_id, 1, process)
    assert first["_source"] == value
    assert process.signal(signal.SIGTERM, timeout=60) == 0

    again = persister("--from-beginning", **env)
    assert wait_for_version(sync_es, target, doc_id, 2, again)["_source"] == value  # the same _id rewritten
    sync_es.indices.refresh(index=target)
    assert sync_es.count(index=target)["count"] == 1
    assert again.signal(signal.SIGTERM, timeout=60) == 0
