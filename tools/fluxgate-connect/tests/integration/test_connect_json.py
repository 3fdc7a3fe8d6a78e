"""JSON topics through ``fluxgate connect``: an Elastic sink config with Kafka Connect's JsonConverter
(string keys, each record's document id by ``PK _key``), once without schemas (bare JSON) and
once with them (the {schema, payload} envelope), moves the topic's records into Elasticsearch; a
record that does not decode reaches the config's dead-letter topic with the reason, and the
consumer group commits past it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from connect_runs import connect
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter as dlq

pytestmark = pytest.mark.integration

ENVELOPE_SCHEMA = {
    "type": "struct",
    "name": "reading",
    "optional": False,
    "fields": [
        {"field": "device_id", "type": "string", "optional": False},
        {"field": "temperature", "type": "double", "optional": False},
        {"field": "count", "type": "int64", "optional": True},
        {"field": "at", "type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp"},
    ],
}
AT = 1773478800000  # 2026-03-14T09:00:00Z


def readings(run: str, count: int) -> list[dict[str, Any]]:
    return [{"device_id": f"json-{run}-{n}", "temperature": 20.5 + n, "count": n, "at": AT + n} for n in range(count)]


def config(folder: Path, name: str, topic: str, index: str, schemas: bool, elasticsearch: str, dead: str) -> Path:
    """An Elastic sink config of JSON values and string keys, as a Stream-Reactor user writes one."""
    path = folder / f"{name}.properties"
    path.write_text(
        "# A JSON topic's Elastic sink, written for this test in the shape of the Stream-Reactor docs' own\n"
        f"name={name}\n"
        "connector.class=io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector\n"
        "tasks.max=1\n"
        f"topics={topic}\n"
        f"connect.elastic.url={elasticsearch}\n"
        f"connect.elastic.kcql=INSERT INTO {index} SELECT * FROM {topic} PK _key\n"  # the string key is the id
        "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
        "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
        f"value.converter.schemas.enable={str(schemas).lower()}\n"
        "errors.tolerance=all\n"
        f"errors.deadletterqueue.topic.name={dead}\n"
    )
    return path


def produce(bootstrap: str, topic: str, records: list[tuple[str, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, value, key.encode(), partition=0)  # one partition: the bad one sits between
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [position] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return int(position.offset)
    finally:
        consumer.close()


@pytest.mark.parametrize("schemas", [False, True], ids=["bare", "envelope"])
def test_a_json_topic_flows_into_elasticsearch_and_a_bad_record_is_dead_lettered(
    schemas: bool, stack: Any, elasticsearch: str, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    values = readings(run, 4)
    encoded = [json.dumps({"schema": ENVELOPE_SCHEMA, "payload": v} if schemas else v).encode() for v in values]
    bad = json.dumps(values[0]).encode() if schemas else b'{"device_id": "json-broken", '
    topic = unique_topic("connect.json", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.json.deadletter", stack.bootstrap, partitions=1)
    records = [(f"key-{v['device_id']}", e) for v, e in zip(values, encoded, strict=True)]
    produce(stack.bootstrap, topic, [*records[:2], ("json-broken", bad), *records[2:]])
    index, name = f"connect-json-{run}", f"connect-json-{run}"

    def found() -> dict[str, dict[str, Any]]:
        httpx.post(f"{elasticsearch}/{index}/_refresh")
        answer = httpx.get(f"{elasticsearch}/{index}/_search", params={"size": 100}).json()
        return {hit["_id"]: hit["_source"] for hit in answer.get("hits", {}).get("hits", [])}

    try:
        with connect(
            config(tmp_path, name, topic, index, schemas, elasticsearch, dead), "FLUXGATE_ES_", stack, {}
        ) as es:
            es.start()
            es.wait_until(lambda: len(found()) >= len(values), f"{len(values)} documents in {index}", 60)
            es.wait_until(lambda: committed(stack.bootstrap, f"connect-{name}", topic) == 5, "a commit past all", 30)
            assert es.terminate() == 0, es.log_tail()
        documents = found()
    finally:
        httpx.delete(f"{elasticsearch}/{index}")
    by_key = {f"key-{value['device_id']}": value for value in values}  # PK _key: each record's key is its id
    assert documents.keys() == by_key.keys()
    assert all({**documents[key], "at": value["at"]} == value for key, value in by_key.items())
    first = documents[f"key-{values[0]['device_id']}"]["at"]  # a Timestamp is a date; bare JSON keeps the number
    assert str(first).startswith("2026-03-14T09:00:00") if schemas else first == AT
    [letter] = consume(stack.bootstrap, dead, expected=1, idle=1.0)
    assert letter.value == bad and letter.key == b"json-broken"
    reason = (letter.header(dlq.REASON) or b"").decode()
    expected = 'schemas.enable is true, so each value must be a JSON object of exactly two fields, "schema"'
    assert reason.startswith(expected if schemas else "not JSON: "), reason
    assert letter.header(dlq.SOURCE_OFFSET) == b"2" and letter.header(dlq.SOURCE_TOPIC) == topic.encode()
