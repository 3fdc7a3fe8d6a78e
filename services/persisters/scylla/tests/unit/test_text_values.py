"""Text into typed columns under a connector config's matching (text_values), and ours untouched."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from scylla_store import any_item

from fluxgate_scylla_persister.table import ColumnMatch, RowBinder, TableName
from fluxgate_scylla_persister.text_values import text_coercion
from fluxgate_sink.errors import SinkError
from fluxgate_sink.kcql import parse

NAME = TableName("k", "t")
TYPES = {
    "id": "text",
    "n": "int",
    "big": "bigint",
    "x": "double",
    "d": "decimal",
    "ok": "boolean",
    "at": "timestamp",
    "u": "uuid",
}
ID = "6f1c9a56-5b3e-4d4c-9b8e-3f0d1c2b4a59"


def bound(record: dict[str, Any], match: ColumnMatch = "stream-reactor-10") -> dict[str, Any]:
    names = ", ".join(record)
    (statement,) = parse(f"INSERT INTO k.t SELECT {names} FROM x PROPERTIES(deletesEnabled=false)")
    binder = RowBinder(NAME, list(TYPES), statement, match=match, types=TYPES)
    values = binder.values(any_item(statement, record, timestamp_ms=1))
    return {c: v for c, v in zip(TYPES, values, strict=False) if c in record}


def test_text_reads_as_each_column_type_as_the_connectors_read_it() -> None:
    record = {
        "id": "42",  # a text column keeps the text
        "n": "-7",
        "big": "9007199254740993",
        "x": "21.5",
        "d": "0.10",
        "ok": "TRUE",
        "at": "2026-11-28T01:00:00Z",
        "u": ID,
    }
    assert bound(record) == {
        "id": "42",
        "n": -7,
        "big": 9007199254740993,
        "x": 21.5,
        "d": Decimal("0.10"),
        "ok": True,
        "at": datetime(2026, 11, 28, 1, tzinfo=UTC),
        "u": uuid.UUID(ID),
    }


def test_a_timestamp_is_epoch_millis_or_iso_8601_and_naive_is_utc() -> None:
    assert bound({"id": "a", "at": "1764291600000"})["at"] == 1764291600000
    assert bound({"id": "a", "at": "2026-11-28 01:00:00"})["at"] == datetime(2026, 11, 28, 1, tzinfo=UTC)
    assert bound({"id": "a", "at": "2026-11-28T02:00:00+01:00"})["at"] == datetime(2026, 11, 28, 1, tzinfo=UTC)


def test_typed_values_and_our_own_services_are_bound_as_they_are() -> None:
    assert bound({"id": "a", "n": 5, "x": 1.5})["n"] == 5
    assert bound({"id": "a", "n": "5"}, match="fluxgate")["n"] == "5"  # ours are Avro: typed already
    assert bound({"id": "a", "n": "5"}, match="stream-reactor")["n"] == 5  # Cassandra's INSERT JSON reads it


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"n": "4.2"}, r"n: '4.2' is not a int \(not an integer\)"),
        ({"n": "1_000"}, "not an integer"),
        ({"x": "inf"}, r"x: 'inf' is not a double"),
        ({"ok": "yes"}, "neither true nor false"),
        ({"at": "yesterday"}, "at: 'yesterday' is not a timestamp"),
        ({"u": "x" * 50}, r"u: 'x{40}\.\.\.' is not a uuid"),
    ],
)
def test_a_text_that_does_not_read_as_its_column_fails_its_record_naming_both(record: dict[str, str], why: str) -> None:
    with pytest.raises(SinkError, match=why) as failed:
        bound({"id": "a", **record})
    assert not failed.value.retriable


def test_the_driver_binds_text_to_the_other_types_itself() -> None:
    assert [text_coercion(t) for t in ("text", "ascii", "varchar", "inet", "date", "time", "blob", "list<int>")] == [
        None
    ] * 8
