"""A Cassandra sink config, run by ``fluxgate connect``: Avro aggregates on its topic end up as
rows of the KCQL's table (AUTOCREATE) in the config's key space, read back with CQL."""

from __future__ import annotations

import io
import json
import struct
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest
from cassandra.cluster import Cluster
from confluent_kafka import Producer
from connect_runs import (
    KEYSPACE,
    aggregates,
    committed,
    connect,
    cql_table,
    lines,
    own_names,
    produce_aggregates,
    run_until,
)
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter as dlq
from fluxgate_core.serde import key_subject, register

pytestmark = pytest.mark.integration


def test_the_cassandra_sink_config_moves_aggregates_into_its_table(
    stack: Any, registry_client: Any, cassandra: tuple[str, int]
) -> None:
    values = aggregates(20)
    topic = produce_aggregates(stack, registry_client, "connect.temperatures.aggregated", values)
    table = f"t_{uuid.uuid4().hex[:10]}"
    host, port = cassandra
    cluster = Cluster([host], port=port)
    session = cluster.connect()

    def rows() -> list[Any]:
        exists = session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'fluxgate_connect' AND table_name = %s",
            (table,),
        ).one()
        return list(session.execute(f"SELECT device_id, max FROM fluxgate_connect.{table}")) if exists else []

    placeholders = {"AGGREGATES_TOPIC": topic, "CASSANDRA_TABLE": table,
                    "CASSANDRA_HOST": host, "CASSANDRA_PORT": str(port)}  # fmt: skip
    try:
        with connect("cassandra-sink-local.properties", "FLUXGATE_SCYLLA_", stack, placeholders) as persister:
            persister.start()
            persister.wait_until(lambda: len(rows()) >= len(values), f"{len(values)} rows in {table}", 90)
            assert persister.terminate() == 0, persister.log_tail()
        assert sorted(row.max for row in rows()) == sorted(value["max"] for value in values)
        assert "running scylla-persister" in persister.log_text()
    finally:
        session.execute(f"DROP TABLE IF EXISTS fluxgate_connect.{table}")
        cluster.shutdown()


ORDERS_DELETE = ("DELETE FROM {table} WHERE id = ? and product = ?", "id,product")


def deletes_config(
    path: Path,
    names: tuple[str, str, str],
    cassandra: tuple[str, int],
    *more: str,
    delete: tuple[str, str] = ORDERS_DELETE,
) -> Path:
    """The Cassandra sink page's example with its delete keys (connector, topic and table names of
    the test's own; ``delete``: the statement and its key fields) on the stack's Cassandra, JSON
    values, then ``more`` lines (the key converter)."""
    (name, topic, table), (host, port) = names, cassandra
    statement, fields = delete
    path.write_text(lines(
        "# The Cassandra sink page's example with its delete keys, written for a test's table and topic",
        f"name={name}",
        "connector.class=io.lenses.streamreactor.connect.cassandra.sink.CassandraSinkConnector",
        f"topics={topic}",
        f"connect.cassandra.kcql=INSERT INTO {table} SELECT * FROM {topic}",
        f"connect.cassandra.contact.points={host}",
        f"connect.cassandra.port={port}",
        f"connect.cassandra.key.space={KEYSPACE}",
        "connect.cassandra.delete.enabled=true",
        f"connect.cassandra.delete.statement={statement.format(table=table)}",
        f"connect.cassandra.delete.struct_flds={fields}",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable=false",
        *more,
    ))  # fmt: skip
    return path


def orders_after(
    stack: Any, cassandra: tuple[str, int], path: Path, names: tuple[str, str, str], records: int
) -> dict[tuple[str, str], int | None]:
    """The orders table's rows, (id, product) -> qty, once the config at ``path`` has run past
    the first ``records`` records of its topic into a table made for it."""
    name, topic, table = names

    def done() -> bool:
        return bool(committed(stack.bootstrap, f"connect-{name}", topic) == records)

    with cql_table(cassandra, table, "id text, product text, qty int, PRIMARY KEY (id, product)") as session:
        run_until(path, "FLUXGATE_SCYLLA_", stack, done, f"a commit past all {records} records", 90)
        return {(row.id, row.product): row.qty for row in session.execute(f"SELECT * FROM {KEYSPACE}.{table}")}


def test_a_tombstone_runs_the_documented_delete_statement_bound_from_its_key(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    # Stream-Reactor's documentation's delete ("Deletion in Cassandra"): a text key holding JSON, its
    # fields id and product bound to DELETE FROM orders WHERE id = ? and product = ?
    # (CassandraJsonWriter.scala's delete, KeyUtils.keysFromJson). Records of one row come in order:
    # written, deleted, written again; the last write stays.
    table, name, topic = own_names(stack, "orders")
    dead = unique_topic("connect.orders.deadletter", stack.bootstrap, partitions=1)

    def key(order: str, product: str | None) -> bytes:
        return json.dumps({"id": order, **({"product": product} if product else {})}).encode()

    def value(order: str, product: str, qty: int) -> bytes:
        return json.dumps({"id": order, "product": product, "qty": qty}).encode()

    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for k, v in [
        (key("o1", "p1"), value("o1", "p1", 1)),
        (key("o2", "p2"), value("o2", "p2", 2)),
        (key("o3", "p3"), value("o3", "p3", 3)),
        (key("o1", "p1"), None),  # deleted
        (key("o3", "p3"), None),  # deleted, then written again
        (key("o3", "p3"), value("o3", "p3", 33)),
        (key("o2", None), None),  # no product in the key: dead-lettered, o2 stays
    ]:
        producer.produce(topic, v, k, partition=0)
    assert producer.flush(30) == 0
    path = deletes_config(
        tmp_path / "orders.properties", (name, topic, table), cassandra,
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "errors.tolerance=all", "connect.cassandra.error.policy=NOOP", f"errors.deadletterqueue.topic.name={dead}",
    )  # fmt: skip

    rows = orders_after(stack, cassandra, path, (name, topic, table), 7)
    assert rows == {("o2", "p2"): 2, ("o3", "p3"): 33}
    [letter] = consume(stack.bootstrap, dead, expected=1, idle=1.0)
    assert letter.key == key("o2", None) and letter.header(dlq.SOURCE_OFFSET) == b"6"
    assert "the record key has no field product" in (letter.header(dlq.REASON) or b"").decode()


@pytest.mark.parametrize(
    ("delete", "left"),
    [
        # the partition of the key's id: o1's rows written before the tombstone go, o1/p3 after it stays
        (("DELETE FROM {table} WHERE id = ?", "id"), {("o1", "p3"): 4, ("o2", "p1"): 3}),
        # a row's cell: o1/p1 stays, its qty gone
        (("DELETE qty FROM {table} WHERE id = ? AND product = ?", "id,product"),
         {("o1", "p1"): None, ("o1", "p2"): 2, ("o1", "p3"): 4, ("o2", "p1"): 3}),
    ],
    ids=["partition", "cells"],
)  # fmt: skip
def test_a_tombstone_deletes_a_partition_or_a_rows_cells_as_its_statement_says(
    stack: Any, cassandra: tuple[str, int], tmp_path: Path, delete: tuple[str, str], left: dict[Any, Any]
) -> None:
    # Stream-Reactor runs the statement as written (CassandraJsonWriter.scala's delete); the
    # partition's delete and the writes around it, read in one poll, keep their records' order.
    table, name, topic = own_names(stack, "orders")
    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for order, product, qty in [("o1", "p1", 1), ("o1", "p2", 2), ("o2", "p1", 3), ("o1", "p1", None), ("o1", "p3", 4)]:
        key = json.dumps({"id": order, "product": product}).encode()
        value = None if qty is None else json.dumps({"id": order, "product": product, "qty": qty}).encode()
        producer.produce(topic, value, key, partition=0)
    assert producer.flush(30) == 0
    path = deletes_config(
        tmp_path / "orders.properties", (name, topic, table), cassandra,
        "key.converter=org.apache.kafka.connect.storage.StringConverter", delete=delete,
    )  # fmt: skip

    rows = orders_after(stack, cassandra, path, (name, topic, table), 5)
    assert rows == left


ORDER_KEY = (
    '{"type": "record", "name": "OrderKey", "fields": [{"name": "id", "type": "string"}, '
    '{"name": "product", "type": "string"}]}'
)


def test_a_tombstone_with_an_avro_record_key_deletes_by_its_fields(
    stack: Any, registry_client: Any, cassandra: tuple[str, int], tmp_path: Path
) -> None:
    # The documentation's case: "key fields key.id and key.product" of a Struct key (Confluent's
    # AvroConverter), KeyUtils.keysFromStruct. The keys' schema is read ahead of routing.
    table, name, topic = own_names(stack, "avro_orders")
    schema_id = register(registry_client, key_subject(topic), ORDER_KEY, None)

    def key(order: str, product: str) -> bytes:
        body = io.BytesIO()
        fastavro.schemaless_writer(
            body, fastavro.parse_schema(json.loads(ORDER_KEY)), {"id": order, "product": product}
        )
        return struct.pack(">bI", 0, schema_id) + body.getvalue()

    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for k, v in [
        (key("o1", "p1"), json.dumps({"id": "o1", "product": "p1", "qty": 1}).encode()),
        (key("o2", "p2"), json.dumps({"id": "o2", "product": "p2", "qty": 2}).encode()),
        (key("o1", "p1"), None),
    ]:
        producer.produce(topic, v, k, partition=0)
    assert producer.flush(30) == 0
    path = deletes_config(
        tmp_path / "avro-orders.properties", (name, topic, table), cassandra,
        "key.converter=io.confluent.connect.avro.AvroConverter",
        f"key.converter.schema.registry.url={stack.registry_url}",
    )  # fmt: skip

    rows = orders_after(stack, cassandra, path, (name, topic, table), 3)
    assert rows == {("o2", "p2"): 2}
