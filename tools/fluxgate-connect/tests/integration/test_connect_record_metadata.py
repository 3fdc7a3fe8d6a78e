"""Record metadata in a SELECT, through ``fluxgate connect``: a Stream-Reactor 10.x Cassandra sink
config whose KCQL names the JSON key's field (``_key.id``) and a header (``_header.source``) writes
both into their aliased columns of an existing table, as 10.x maps them (CassandraSettings.scala,
getTopicMappings). A header that is not UTF-8 is written as SimpleHeaderConverter reads it (U+FFFD
for each bad byte); a record whose key lacks the field (the NOOP error policy) and one whose key is not JSON
(errors.tolerance=all) each reach the config's dead-letter topic with the reason, and the group
commits past both."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from connect_runs import KEYSPACE, cassandra_10_config, committed, cql_table, run_until
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter as dlq

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, dict[str, Any], bytes]]) -> None:
    """``(key, value, source header)`` records into partition 0 of ``topic``, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value, source in records:
        producer.produce(topic, json.dumps(value).encode(), key, partition=0, headers=[("source", source)])
    assert producer.flush(30) == 0


def test_a_key_field_and_a_header_reach_their_columns_and_bad_keys_are_dead_lettered(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    table, name = f"meta_{run}", f"connect-meta-{run}"
    topic = unique_topic("connect.meta", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.meta.deadletter", stack.bootstrap, partitions=1)
    good = [(json.dumps({"id": f"d-{run}-{n}"}).encode(), {"temperature": 20.5 + n}, f"mqtt-{n}".encode())
            for n in range(3)]  # fmt: skip
    bad_header = (json.dumps({"id": f"d-{run}-latin"}).encode(), {"temperature": 9.0}, b"caf\xe9")
    no_field = (json.dumps({"serial": 7}).encode(), {"temperature": 1.0}, b"mqtt")
    not_json = (b'{"id": ', {"temperature": 2.0}, b"mqtt")
    produce(stack.bootstrap, topic, [*good[:2], no_field, not_json, good[2], bad_header])
    kcql = f"INSERT INTO {KEYSPACE}.{table} SELECT _key.id AS device, temperature, _header.source AS src FROM {topic}"
    path = cassandra_10_config(
        tmp_path / "cassandra-meta.properties", name, topic, kcql, cassandra,
        "key.converter=org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable=false",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable=false",
        "errors.tolerance=all",  # the key that does not decode: a converter error
        "connect.cassandra.error.policy=NOOP",  # the missing key field: the sink's own error policy
        f"errors.deadletterqueue.topic.name={dead}",
    )  # fmt: skip

    def rows() -> dict[str, tuple[float, str]]:
        found = session.execute(f"SELECT device, temperature, src FROM {KEYSPACE}.{table}")
        return {row.device: (row.temperature, row.src) for row in found}

    def done() -> bool:
        return len(rows()) >= 4 and committed(stack.bootstrap, f"connect-{name}", topic) == 6

    with cql_table(cassandra, table, "device text PRIMARY KEY, temperature double, src text") as session:
        run_until(path, "FLUXGATE_SCYLLA_", stack, done, "4 rows and a commit past all 6 records", 90)
        written = rows()
    assert written == {
        **{f"d-{run}-{n}": (20.5 + n, f"mqtt-{n}") for n in range(3)},
        f"d-{run}-latin": (9.0, "caf\ufffd"),
    }
    letters = consume(stack.bootstrap, dead, expected=2, idle=1.0)
    reasons = {letter.key: (letter.header(dlq.REASON) or b"").decode() for letter in letters}
    assert reasons.keys() == {no_field[0], not_json[0]}
    assert "id" in reasons[no_field[0]], reasons
    assert "the record key does not decode" in reasons[not_json[0]], reasons
