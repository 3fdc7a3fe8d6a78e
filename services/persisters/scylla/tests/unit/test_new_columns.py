"""What a field the table has no column for becomes: a column AUTOCREATE adds, or a refusal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fluxgate_testing.aggregates import temperature_aggregate
from fluxgate_testing.sink.items import sink_item

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_scylla_persister.consumed import CQL_TYPES, cql_type
from fluxgate_scylla_persister.sink import schema_id
from fluxgate_scylla_persister.table import UNKNOWN_TYPE, RowBinder, TableName, column_changes
from fluxgate_sink.errors import SinkError
from fluxgate_sink.kcql import parse

TABLE = TableName("fluxgate", "temperature_aggregates")
START = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("avro", "cql"),
    [
        (["null", "string"], "text"),
        ("string", "text"),
        ({"type": "string", "avro.java.string": "String"}, "text"),
        (["null", "long"], "bigint"),
        ("int", "int"),
        (["double", "null"], "double"),
        ("float", "float"),
        (["null", "boolean"], "boolean"),
        ("bytes", "blob"),
        ({"type": "long", "logicalType": "timestamp-millis"}, "timestamp"),
        (["null", {"type": "long", "logicalType": "timestamp-millis"}], "timestamp"),
    ],
)
def test_a_new_field_gets_the_type_autocreate_gives_its_avro_type(avro: Any, cql: str) -> None:
    assert cql_type(avro) == cql


@pytest.mark.parametrize(
    "avro",
    [
        ["null", "string", "long"],
        {"type": "array", "items": "string"},
        {"type": "map", "values": "double"},
        {"type": "enum", "name": "Mode", "symbols": ["A"]},
        {"type": "record", "name": "Where", "fields": []},
        {"type": "long", "logicalType": "timestamp-micros"},
        "null",
    ],
)
def test_a_type_without_a_cql_column_type_maps_to_none(avro: Any) -> None:
    assert cql_type(avro) is None


def test_the_mapping_is_the_one_autocreate_types_the_schemas_fields_with() -> None:
    fields = {field["name"]: field["type"] for field in schema_dict(TEMPERATURE_AGGREGATE)["fields"]}
    assert {name: cql_type(fields[name]) for name in CQL_TYPES} == dict(CQL_TYPES)


def test_with_autocreate_a_field_that_maps_gets_a_column() -> None:
    changes = column_changes({"firmware": ["null", "string"], "battery": "double"}, TABLE, autocreate=True)
    assert changes.add == {"firmware": "text", "battery": "double"}
    assert changes.refused == {}


def test_with_autocreate_a_field_that_does_not_map_is_refused_saying_why() -> None:
    changes = column_changes(
        {"tags": {"type": "array", "items": "string"}, "note": UNKNOWN_TYPE}, TABLE, autocreate=True
    )
    assert changes.add == {}
    assert changes.refused["tags"] == (
        "tags: not a column of fluxgate.temperature_aggregates, and AUTOCREATE cannot add it: its Avro type"
        ' {"type": "array", "items": "string"} has no CQL type; add the column or IGNORE the field in KCQL'
    )
    assert "the record's writer schema is unknown" in changes.refused["note"]


def test_without_autocreate_a_field_without_a_column_is_refused_as_stream_reactor_does() -> None:
    changes = column_changes({"firmware": ["null", "string"]}, TABLE, autocreate=False)
    assert changes.add == {}
    assert changes.refused == {
        "firmware": "firmware: not a column of fluxgate.temperature_aggregates; add the column or IGNORE the field"
        " in KCQL"
    }


def test_a_refused_field_fails_its_record_with_the_reason_and_names_the_plain_ones_together() -> None:
    (statement,) = parse("UPSERT INTO fluxgate.temperature_aggregates SELECT * FROM temperatures.aggregated")
    columns = [c for c in CQL_TYPES if c not in ("stddev", "unit")] + ["day"]
    binder = RowBinder(TABLE, columns, statement, {"tags": "tags: why not"})
    record = {**temperature_aggregate("Sensor4", START), "tags": ["a"]}
    with pytest.raises(SinkError) as refused:
        binder.values(sink_item(statement, record))
    assert str(refused.value) == (
        "stddev, unit: not a column of fluxgate.temperature_aggregates; add the column or IGNORE the field in KCQL;"
        " tags: why not"
    )


def test_the_schema_id_of_a_value_is_read_from_its_wire_header_only() -> None:
    assert schema_id(b"\x00\x00\x00\x02\x1c" + b"body") == 540
    assert schema_id(b'{"device_id": "a"}') is None
    assert schema_id(b"") is None
