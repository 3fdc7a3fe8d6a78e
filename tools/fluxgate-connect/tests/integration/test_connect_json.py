"""JSON topics through ``fluxgate connect``: an Elastic sink config with Kafka Connect's JsonConverter
(string keys, each record's document id by ``PK _key``), once without schemas (bare JSON) and
once with them (the {schema, payload} envelope), moves the topic's records into Elasticsearch; a
record that does not decode reaches the config's dead-letter topic with the reason, and the
consumer group commits past it. A Cassandra sink config reads the same envelope into a table of its
own: the decoder is the sink runtime's, no persister has code of its own for JSON."""

from __future__ import annotations

import json
import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import httpx
import pytest
from connect_runs import committed, documents, lines, produce, run_until
from fluxgate_testing import consume, unique_topic
from fluxgate_testing.connect_json import TIMESTAMP, envelope, field, struct

from fluxgate_core import deadletter as dlq

pytestmark = pytest.mark.integration

ENVELOPE_SCHEMA = struct(
    "reading",
    field("device_id", "string"),
    field("temperature", "double"),
    field("count", "int64", optional=True),
    field("at", "int64", name=TIMESTAMP),
)
AT = 1773478800000  # 2026-03-14T09:00:00Z
CONVERTERS = ("key.converter=org.apache.kafka.connect.storage.StringConverter",
              "value.converter=org.apache.kafka.connect.json.JsonConverter")  # fmt: skip


def readings(run: str, count: int) -> list[dict[str, Any]]:
    return [{"device_id": f"json-{run}-{n}", "temperature": 20.5 + n, "count": n, "at": AT + n} for n in range(count)]


def config(folder: Path, name: str, topic: str, index: str, schemas: bool, elasticsearch: str, dead: str) -> Path:
    """An Elastic sink config of JSON values and string keys, as a Stream-Reactor user writes one."""
    path = folder / f"{name}.properties"
    path.write_text(lines(
        "# A JSON topic's Elastic sink, written for this test in the shape of the Stream-Reactor docs' own",
        f"name={name}",
        "connector.class=io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector",
        f"topics={topic}",
        f"connect.elastic.url={elasticsearch}",
        f"connect.elastic.kcql=INSERT INTO {index} SELECT * FROM {topic} PK _key",  # the string key is the id
        *CONVERTERS,
        f"value.converter.schemas.enable={str(schemas).lower()}",
        "errors.tolerance=all",
        f"errors.deadletterqueue.topic.name={dead}",
    ))  # fmt: skip
    return path


@pytest.mark.parametrize("schemas", [False, True], ids=["bare", "envelope"])
def test_a_json_topic_flows_into_elasticsearch_and_a_bad_record_is_dead_lettered(
    schemas: bool, stack: Any, elasticsearch: str, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    values = readings(run, 4)
    encoded = [envelope(v, ENVELOPE_SCHEMA) if schemas else json.dumps(v).encode() for v in values]
    bad = json.dumps(values[0]).encode() if schemas else b'{"device_id": "json-broken", '
    topic = unique_topic("connect.json", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.json.deadletter", stack.bootstrap, partitions=1)
    records = [(f"key-{v['device_id']}", e) for v, e in zip(values, encoded, strict=True)]
    produce(stack.bootstrap, topic, [*records[:2], ("json-broken", bad), *records[2:]])
    index, name = f"connect-json-{run}", f"connect-json-{run}"

    def found() -> dict[str, dict[str, Any]]:
        return documents(elasticsearch, index)

    def done() -> bool:
        return len(found()) >= len(values) and committed(stack.bootstrap, f"connect-{name}", topic) == 5

    sink_config = config(tmp_path, name, topic, index, schemas, elasticsearch, dead)
    try:
        run_until(sink_config, "FLUXGATE_ES_", stack, done, f"{len(values)} documents, a commit past all", 60)
        written = found()
    finally:
        httpx.delete(f"{elasticsearch}/{index}")
    by_key = {f"key-{value['device_id']}": value for value in values}  # PK _key: each record's key is its id
    assert written.keys() == by_key.keys()
    assert all({**written[key], "at": value["at"]} == value for key, value in by_key.items())
    first = written[f"key-{values[0]['device_id']}"]["at"]  # a Timestamp is a date; bare JSON keeps the number
    assert str(first).startswith("2026-03-14T09:00:00") if schemas else first == AT
    [letter] = consume(stack.bootstrap, dead, expected=1, idle=1.0)
    assert letter.value == bad and letter.key == b"json-broken"
    reason = (letter.header(dlq.REASON) or b"").decode()
    expected = 'schemas.enable is true, so each value must be a JSON object of exactly two fields, "schema"'
    assert reason.startswith(expected if schemas else "not JSON: "), reason
    assert letter.header(dlq.SOURCE_OFFSET) == b"2" and letter.header(dlq.SOURCE_TOPIC) == topic.encode()


def test_a_json_topic_with_schemas_flows_into_an_existing_cassandra_table(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    from cassandra.cluster import Cluster

    run = uuid.uuid4().hex[:8]
    values, table = readings(run, 4), f"json_{run}"
    topic = unique_topic("connect.json", stack.bootstrap, partitions=1)
    produce(stack.bootstrap, topic, [(v["device_id"], envelope(v, ENVELOPE_SCHEMA))
                                     for v in values])  # fmt: skip
    host, port = cassandra
    cluster = Cluster([host], port=port)
    session = cluster.connect()
    session.execute("CREATE KEYSPACE IF NOT EXISTS fluxgate_connect "
                    "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")  # fmt: skip
    session.execute(f"CREATE TABLE fluxgate_connect.{table} (device_id text PRIMARY KEY, temperature double, "
                    "count bigint, at timestamp)")  # fmt: skip
    path = tmp_path / "cassandra-json.properties"
    path.write_text(lines(
        "# A JSON topic's Cassandra sink, written for this test in the shape of the Stream-Reactor docs' own",
        f"name=connect-json-{run}",
        "connector.class=io.lenses.streamreactor.connect.cassandra.sink.CassandraSinkConnector",
        f"topics={topic}",
        f"connect.cassandra.kcql=INSERT INTO {table} SELECT * FROM {topic}",
        f"connect.cassandra.contact.points={host}",
        f"connect.cassandra.port={port}",
        "connect.cassandra.key.space=fluxgate_connect",
        "connect.cassandra.consistency.level=ONE",
        *CONVERTERS,
    ))  # fmt: skip

    def rows() -> dict[str, Any]:
        return {row.device_id: row for row in session.execute(f"SELECT * FROM fluxgate_connect.{table}")}

    try:
        run_until(path, "FLUXGATE_SCYLLA_", stack, lambda: len(rows()) >= len(values), f"{len(values)} rows", 90)
        written = rows()
    finally:
        session.execute(f"DROP TABLE IF EXISTS fluxgate_connect.{table}")
        cluster.shutdown()
    assert {(r.device_id, r.temperature, r.count) for r in written.values()} == {
        (v["device_id"], v["temperature"], v["count"]) for v in values
    }
    first = written[values[0]["device_id"]].at  # the envelope's Timestamp, a CQL timestamp (naive UTC)
    assert int(first.replace(tzinfo=UTC).timestamp() * 1000) == AT


def test_a_string_key_is_parsed_as_json_first_for_the_document_id(
    stack: Any, elasticsearch: str, tmp_path: Path
) -> None:
    """StringConverter keys, parsed as JSON first as Stream-Reactor's Elastic sink does for PK _key
    (elastic7's JsonPayloadExtractor.scala): 1.50 is the number 1.5, its id 1.5; 007 and sensor-7
    are not JSON and stay as they are."""
    run = uuid.uuid4().hex[:8]
    values = readings(run, 3)
    topic = unique_topic("connect.json.keys", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.json.keys.deadletter", stack.bootstrap, partitions=1)
    keys = ["1.50", "007", f"sensor-{run}"]
    produce(stack.bootstrap, topic, [(k, json.dumps(v).encode()) for k, v in zip(keys, values, strict=True)])
    index = name = f"connect-json-keys-{run}"

    def done() -> bool:
        return len(documents(elasticsearch, index)) >= len(values)

    sink_config = config(tmp_path, name, topic, index, False, elasticsearch, dead)
    try:
        run_until(sink_config, "FLUXGATE_ES_", stack, done, f"{len(values)} documents", 60)
        written = documents(elasticsearch, index)
    finally:
        httpx.delete(f"{elasticsearch}/{index}")
    assert {key: doc["device_id"] for key, doc in written.items()} == {
        "1.5": values[0]["device_id"],
        "007": values[1]["device_id"],
        f"sensor-{run}": values[2]["device_id"],
    }
