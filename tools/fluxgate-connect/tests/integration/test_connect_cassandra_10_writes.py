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
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from connect_runs import KEYSPACE, cassandra_10_config, committed, cql_table, own_names, run_until
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter as dlq

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
    table, name, topic = own_names(stack, "timed")
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
    table, name, topic = own_names(stack, "tomb")
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


def test_text_fields_and_headers_fill_typed_columns_as_datastax_reads_them(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    # Schemaless JSON holds text; DataStax's codecs read it as the column's type (dsbulk's
    # StringToInstantCodec ...): an ISO-8601 time into a timestamp column. A header "42" is already the
    # int 42 (SimpleHeaderConverter's reading) for the int column. One that does not read as its type
    # is dead-lettered, naming it.
    table, name, topic = own_names(stack, "typed")
    dead = unique_topic("connect.typed.deadletter", stack.bootstrap, partitions=1)
    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for device, at, count in [
        ("d1", "2026-11-28T01:00:00Z", b"42"),
        ("d2", "1795827600000", b"7"),
        ("d3", "soon", b"1"),
    ]:
        value = json.dumps({"device": device, "at": at, "ok": "true"}).encode()
        producer.produce(topic, value, partition=0, headers=[("count", count)])
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {KEYSPACE}.{table} SELECT device, at, ok, _header.count AS n FROM {topic}"
    path = cassandra_10_config(
        tmp_path / "typed.properties", name, topic, kcql, cassandra, *JSON_VALUES,
        "errors.tolerance=all", "connect.cassandra.error.policy=NOOP", f"errors.deadletterqueue.topic.name={dead}",
    )  # fmt: skip

    def done() -> bool:
        return committed(stack.bootstrap, f"connect-{name}", topic) == 3

    columns = "device text PRIMARY KEY, at timestamp, ok boolean, n int"
    with cql_table(cassandra, table, columns) as session:
        run_until(path, "FLUXGATE_SCYLLA_", stack, done, "a commit past all 3 records", 90)
        rows = {row.device: (row.at, row.ok, row.n) for row in session.execute(f"SELECT * FROM {KEYSPACE}.{table}")}
    at = datetime(2026, 11, 28, 1)  # the driver reads a timestamp back naive, in UTC
    assert rows == {"d1": (at, True, 42), "d2": (at, True, 7)}
    [letter] = consume(stack.bootstrap, dead, expected=1, idle=1.0)
    assert "at: 'soon' is not a timestamp" in (letter.header(dlq.REASON) or b"").decode()


def test_rows_of_one_partition_batched_together_keep_their_own_records_time(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    # The rows of one partition go as one unlogged batch (grouping.py); each INSERT in it carries its
    # own USING TIMESTAMP, which Cassandra takes per statement when the batch sets none.
    table, name, topic = own_names(stack, "batched")
    t0 = int(time.time() * 1000) - 600_000
    records = [("d1", {"device": "d1", "seq": n, "temperature": 20.0 + n}, t0 + 10 * n) for n in range(5)]
    produce(stack.bootstrap, topic, records)
    kcql = f"INSERT INTO {KEYSPACE}.{table} SELECT device, seq, temperature FROM {topic}"
    path = cassandra_10_config(tmp_path / "batched.properties", name, topic, kcql, cassandra, *JSON_VALUES)

    def done() -> bool:
        return committed(stack.bootstrap, f"connect-{name}", topic) == len(records)

    columns = "device text, seq int, temperature double, PRIMARY KEY ((device), seq)"
    with cql_table(cassandra, table, columns) as session:
        run_until(path, "FLUXGATE_SCYLLA_", stack, done, f"a commit past all {len(records)} records", 90)
        cql = f"SELECT seq, temperature, WRITETIME(temperature) AS at FROM {KEYSPACE}.{table} WHERE device = 'd1'"
        written = {row.seq: (row.temperature, row.at) for row in session.execute(cql)}
    assert written == {n: (20.0 + n, (t0 + 10 * n) * 1000) for n in range(5)}
