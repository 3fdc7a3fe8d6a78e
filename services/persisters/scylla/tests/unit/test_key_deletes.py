"""Stream-Reactor's older Cassandra sinks' deletes (scylla.delete_statement, .delete_key_fields):
the statement's form, and how a tombstone's key fills its markers (CassandraJsonWriter.scala's
``delete``, KeyUtils.scala)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_scylla_persister.key_deletes import KeyDelete
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_sink.errors import SinkError
from fluxgate_sink.kcql import parse
from fluxgate_sink.sink import SinkItem

ORDERS = "DELETE FROM orders WHERE id = ? and product = ?"


def tombstone(key: Any) -> SinkItem:
    """A tombstone's item as the router makes it for a statement that does not read the key."""
    (statement,) = parse("INSERT INTO orders SELECT * FROM orders")
    source = ConsumedRecord("orders", 0, 0, b"k", b"", (), 0, None)
    return SinkItem(source, statement, "orders", "", {"_key": key}, datetime(2026, 11, 28, tzinfo=UTC))


@pytest.mark.parametrize(
    ("statement", "table", "columns"),
    [
        (ORDERS, (None, "orders"), ("id", "product")),
        ("delete from Demo.Orders where ID=? ;", ("demo", "orders"), ("id",)),
        ('DELETE FROM "Demo"."My.Orders" WHERE "Id" = ?', ("Demo", "My.Orders"), ("Id",)),
        ("DELETE\nFROM orders\nWHERE id = ?\n  AND product = ?", (None, "orders"), ("id", "product")),
    ],
)
def test_a_delete_of_one_row_is_read_as_cql_reads_its_names(
    statement: str, table: tuple[str | None, str], columns: tuple[str, ...]
) -> None:
    fields = ["id", "product"] if len(columns) == 2 else []
    delete = KeyDelete.parse(statement, fields)
    assert (delete.keyspace, delete.table) == table and delete.columns == columns


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("DELETE FROM t WHERE device = ? AND day = ? AND at = ? AND seq = ?", 2),  # a row
        ("DELETE FROM t WHERE day = ? AND device = ?", 0),  # a partition
        ("DELETE FROM t WHERE device = ? AND day = ? AND at = ?", 1),  # a range of it
        ('DELETE mean, "Note" FROM t WHERE device = ? AND day = ? AND at = ? AND seq = ?', 2),  # a row's cells
    ],
)
def test_a_delete_names_a_row_its_cells_a_partition_or_a_range_of_it(statement: str, named: int) -> None:
    delete = KeyDelete.parse(statement, ["a"] * statement.count("?"))
    assert delete.scope(("device", "day"), ("at", "seq")) == named
    assert delete.cells == (("mean", "Note") if "mean" in statement else ())


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("DELETE FROM t WHERE device = ?", "leaves out day of the partition key"),
        ("DELETE FROM t WHERE device = ? AND day = ? AND seq = ?", "names seq without at: a range of clustering"),
        ("DELETE FROM t WHERE device = ? AND day = ? AND mean = ?", "names mean, not of the primary key"),
        ("DELETE mean FROM t WHERE device = ? AND day = ?", "a delete of cells names every primary-key column"),
        ("DELETE at FROM t WHERE device = ? AND day = ? AND at = ? AND seq = ?", "deletes at of the primary key"),
    ],
)
def test_a_delete_cassandra_would_refuse_is_refused_naming_why(statement: str, reason: str) -> None:
    delete = KeyDelete.parse(statement, ["a"] * statement.count("?"))
    with pytest.raises(ValueError, match=reason):
        delete.scope(("device", "day"), ("at", "seq"))


@pytest.mark.parametrize(
    ("statement", "fields", "reason"),
    [
        ("DELETE FROM orders USING TIMESTAMP 5 WHERE id = ?", [], "only DELETE [<column>, ...] FROM <table> WHERE"),
        ("DELETE qty[0] FROM orders WHERE id = ?", [], "only DELETE [<column>, ...] FROM <table> WHERE"),
        ("DELETE FROM orders WHERE id IN (?, ?)", [], "each condition must be <column> = ?"),
        ("DELETE FROM orders WHERE id = 'x'", [], "each condition must be <column> = ?"),
        ("DELETE FROM orders WHERE id = ? IF EXISTS", [], "each condition must be <column> = ?"),
        ("DELETE FROM orders WHERE id = ? AND ID = ?", ["a", "b"], "a column is named twice"),
        (ORDERS, ["id"], "2 markers and delete_key_fields names 1 fields"),
        (ORDERS, [], "name the record key's field for each in delete_key_fields"),
    ],
)
def test_any_other_statement_is_refused_at_start_naming_the_setting(
    statement: str, fields: list[str], reason: str
) -> None:
    with pytest.raises(ValueError, match="delete_statement") as raised:
        ConnectionSettings(delete_statement=statement, delete_key_fields=fields)
    assert reason in str(raised.value)


def test_key_fields_without_a_statement_are_refused() -> None:
    with pytest.raises(ValueError, match="delete_key_fields: set delete_statement too"):
        ConnectionSettings(delete_key_fields=["id"])


@pytest.mark.parametrize(
    ("key", "values"),
    [
        ({"id": "o1", "product": "p1", "more": 1}, ["o1", "p1"]),  # a struct (Avro, JSON with a schema)
        ('{"id": "o1", "product": "p1"}', ["o1", "p1"]),  # a STRING key with struct_flds is JSON
        ({"id": "o1", "product": {"sku": "p1"}}, ["o1", {"sku": "p1"}]),  # a record field: bound as it is
    ],
)
def test_a_keys_fields_fill_the_markers_in_order(key: Any, values: list[Any]) -> None:
    assert KeyDelete.parse(ORDERS, ["id", "product"]).values(tombstone(key)) == values


def test_a_dotted_field_reaches_into_a_nested_record() -> None:
    delete = KeyDelete.parse(ORDERS, ["order.id", "order.product"])
    assert delete.values(tombstone({"order": {"id": "o1", "product": "p1"}})) == ["o1", "p1"]


@pytest.mark.parametrize("key", ["o1", 42])
def test_a_key_of_one_value_fills_the_one_marker(key: Any) -> None:
    assert KeyDelete.parse("DELETE FROM orders WHERE id = ?", []).values(tombstone(key)) == [key]


def test_a_tombstone_of_a_statement_that_selects_key_fields_names_why_it_cannot_delete() -> None:
    item = tombstone("o1")
    with pytest.raises(SinkError, match=r"selects fields of the record key \(_key.<field>\)"):
        KeyDelete.parse("DELETE FROM orders WHERE id = ?", []).values(item._replace(document={"id": "o1"}))


@pytest.mark.parametrize(
    ("fields", "key", "reason"),
    [
        (["id", "product"], None, "the record key is null"),
        (["id", "product"], {"id": "o1"}, "the record key has no field product"),
        (["id", "product"], "o1", "the record key is not JSON"),
        (["id", "product"], "[1, 2]", "the record key is JSON but not an object"),
        ([], {"id": "o1"}, "the record key is a record (fields id): name the field"),
    ],
)
def test_a_key_that_cannot_fill_the_markers_fails_its_record(fields: list[str], key: Any, reason: str) -> None:
    statement = ORDERS if fields else "DELETE FROM orders WHERE id = ?"
    with pytest.raises(SinkError, match=reason.replace("(", r"\(").replace(")", r"\)")) as raised:
        KeyDelete.parse(statement, fields).values(tombstone(key))
    assert not raised.value.retriable  # dead-lettered by the error policy, never retried
