"""How a Stream-Reactor 10.x Cassandra sink config writes, through ``fluxgate connect``, against a
real Cassandra: every row at its record's timestamp, and deletesEnabled's deletes.

DataStax's connector, which 10.x runs, writes each INSERT ``USING TIMESTAMP`` the record's timestamp
(LifeCycleManager.java, makeInsertStatement; RecordMapper.java binds record.getTimestamp() * 1000),
and deletes the row of a record whose non-key fields are all null when the mapping covers every
column (deletesEnabled, default true; RecordMapper.isInsertUpdate). The records here are an hour
old, as in a backlog: a DELETE timed when it runs (DataStax's) would hide the later record that
writes the row again; timed by its record, it does not."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from connect_runs import KEYSPACE, cassandra_10_config, committed, cql_table, run_until
from fluxgate_testing import unique_topic

pytestmark = pytest.mark.integration

JSON_KEYS = ("key.converter=org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable=false")
JSON_VALUES = ("value.converter=org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable=false")


def produce(bootstrap: str, topic: str, records: list[tuple[str, dict[str, Any] | None, int]]) -> None:
    """``(device, value, timestamp in ms)`` records into partition 0 of ``topic``, in order, each
    keyed by ``{"device": device}``; a value of None is a tombstone."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for device, value, timestamp in records:
        encoded = None if value is None else json.dumps(value).encode()
        key = json.dumps({"device": device}).encode()
        producer.produce(topic, encoded, key, partition=0, timestamp=timestamp)
    assert producer.flush(30) == 0


def test_rows_are_written_at_their_records_time_and_all_null_records_delete_them(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    table, name = f"timed_{run}", f"connect-timed-{run}"
    topic = unique_topic("connect.timed", stack.bootstrap, partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000  # an hour ago: a backlog

    def reading(device: str, temperature: float | None) -> tuple[str, dict[str, Any]]:
        return device, {"device": device, "temperature": temperature, "unit": None if temperature is None else "C"}

    records = [
        (*reading("newer-first", 21.0), t0 + 2_000),
        (*reading("newer-first", 5.0), t0 + 1_000),  # older, read later (a replay, a reordering): not written
        (*reading("gone", None), t0 + 3_000),  # every non-key field null: the row is deleted
        (*reading("back", None), t0 + 4_000),
        (*reading("back", 19.5), t0 + 5_000),  # after its delete, by its record's time: written
        (*reading("stays-gone", 18.0), t0 + 6_000),
        (*reading("stays-gone", None), t0 + 7_000),
        (*reading("stays-gone", 17.0), t0 + 6_500),  # older than the delete: stays deleted
    ]
    produce(stack.bootstrap, topic, records)
    kcql = f"INSERT INTO {KEYSPACE}.{table} SELECT device, temperature, unit FROM {topic}"  # deletesEnabled: default
    path = cassandra_10_config(tmp_path / "timed.properties", name, topic, kcql, cassandra, *JSON_VALUES)

    def done() -> bool:
        return committed(stack.bootstrap, f"connect-{name}", topic) == len(records)

    with cql_table(cassandra, table, "device text PRIMARY KEY, temperature double, unit text") as session:
        # A row written before the backlog's records, for the all-null record to delete.
        session.execute(f"INSERT INTO {KEYSPACE}.{table} (device, temperature, unit) VALUES ('gone', 1.0, 'C') "
                        f"USING TIMESTAMP {t0 * 1000}")  # fmt: skip
        run_until(path, "FLUXGATE_SCYLLA_", stack, done, f"a commit past all {len(records)} records", 90)
        found = session.execute(
            f"SELECT device, temperature, unit, WRITETIME(temperature) AS at FROM {KEYSPACE}.{table}"
        )
        written = {row.device: (row.temperature, row.unit, row.at) for row in found}
    assert written == {
        "newer-first": (21.0, "C", (t0 + 2_000) * 1000),
        "back": (19.5, "C", (t0 + 5_000) * 1000),
    }


def test_a_tombstone_deletes_the_row_its_key_names_where_the_select_maps_every_column(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    # DataStax reads a tombstone as a record of its key's fields alone (KeyValueRecord): with the
    # primary key mapped from the key (_key.device, 10.x's key.device), no field maps to a non-key
    # column, so RecordMapper.isInsertUpdate makes it a DELETE.
    run = uuid.uuid4().hex[:8]
    table, name = f"tomb_{run}", f"connect-tomb-{run}"
    topic = unique_topic("connect.tomb", stack.bootstrap, partitions=1)
    t0 = int(time.time() * 1000) - 60_000
    produce(stack.bootstrap, topic, [
        ("kept", {"temperature": 20.0, "unit": "C"}, t0),
        ("deleted", {"temperature": 21.0, "unit": "C"}, t0 + 1),
        ("deleted", None, t0 + 2),  # a tombstone
    ])  # fmt: skip
    kcql = f"INSERT INTO {KEYSPACE}.{table} SELECT _key.device AS device, temperature, unit FROM {topic}"
    path = cassandra_10_config(tmp_path / "tomb.properties", name, topic, kcql, cassandra, *JSON_KEYS, *JSON_VALUES)

    def done() -> bool:
        return committed(stack.bootstrap, f"connect-{name}", topic) == 3

    with cql_table(cassandra, table, "device text PRIMARY KEY, temperature double, unit text") as session:
        run_until(path, "FLUXGATE_SCYLLA_", stack, done, "a commit past all 3 records", 90)
        written = {row.device: row.temperature for row in session.execute(f"SELECT * FROM {KEYSPACE}.{table}")}
    assert written == {"kept": 20.0}
