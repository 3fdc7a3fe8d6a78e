"""The table AUTOCREATE makes, and the values an item binds to its INSERT."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from cassandra.query import UNSET_VALUE
from fluxgate_testing.aggregates import temperature_aggregate
from fluxgate_testing.sink.items import sink_item
from fluxgate_testing.sink.memory import aggregate as minute_aggregate
from fluxgate_testing.sink.memory import record

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_scylla_persister.consumed import CONSUMED_FIELDS, CQL_TYPES
from fluxgate_scylla_persister.settings import DEFAULT_KCQL, ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink
from fluxgate_scylla_persister.table import RowBinder, TableName, autocreate_layout, table_name
from fluxgate_sink.errors import KcqlError, SinkError
from fluxgate_sink.formats import HeaderFormat, header_reader
from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.kcql_routing import Router
from fluxgate_sink.sink import SinkItem

START = datetime(2026, 3, 14, 23, 59, tzinfo=UTC)


def one(kcql: str) -> Statement:
    (statement,) = parse(kcql)
    return statement


def aggregate(**changes: Any) -> dict[str, Any]:
    return temperature_aggregate("Sensor4", START, **changes)


def item(statement: Statement, record: dict[str, Any]) -> SinkItem:
    return sink_item(statement, record)


def test_the_default_table_partitions_by_device_metric_and_day_newest_first() -> None:
    statement = one(DEFAULT_KCQL)
    layout = autocreate_layout(statement, table_name(statement.target, "other"))
    assert str(layout.name) == "fluxgate.temperature_aggregates"
    assert layout.partition_key == ("device_id", "metric", "day")
    assert layout.clustering == ("window_start",)
    assert layout.create_cql() == (
        "CREATE TABLE IF NOT EXISTS fluxgate.temperature_aggregates (device_id text, metric text, "
        "window_start timestamp, window_end timestamp, count bigint, min double, max double, mean double, "
        "stddev double, first_event_time timestamp, last_event_time timestamp, unit text, day date, "
        "PRIMARY KEY ((device_id, metric, day), window_start)) WITH CLUSTERING ORDER BY (window_start DESC)"
    )
    assert layout.insert_cql(None).startswith("INSERT INTO fluxgate.temperature_aggregates (device_id, metric, ")
    assert layout.insert_cql(3600).endswith("USING TTL 3600")


def test_a_ttl_of_zero_writes_without_using_ttl() -> None:
    # CassandraJsonWriter.scala appends USING TTL only for a TTL above 0.
    statement = one(DEFAULT_KCQL + " TTL=0")
    layout = autocreate_layout(statement, table_name(statement.target, "other"))
    assert statement.ttl is None and "USING TTL" not in layout.insert_cql(statement.ttl)


def test_every_consumed_field_has_its_type_in_the_aggregate_schema() -> None:
    schema_types = {field["name"]: field["type"] for field in schema_dict(TEMPERATURE_AGGREGATE)["fields"]}
    assert {n: schema_types.get(n) for n in CONSUMED_FIELDS} == dict(CONSUMED_FIELDS)
    assert set(CQL_TYPES) == set(CONSUMED_FIELDS)


def test_a_target_without_keyspace_takes_the_default_one() -> None:
    assert table_name("aggregates", "fluxgate") == TableName("fluxgate", "aggregates")
    with pytest.raises(KcqlError, match=r"keyspace\.table"):
        table_name("a.b.c", "fluxgate")


def test_selected_renamed_and_ignored_fields_make_the_columns() -> None:
    statement = one(
        "UPSERT INTO ks.t SELECT device_id, metric, window_start AS ws, mean AS avg FROM x"
        " PK device_id, window_start AUTOCREATE PROPERTIES('event.time.field'='window_start')"
    )
    layout = autocreate_layout(statement, table_name(statement.target, "fluxgate"))
    assert dict(layout.columns) == {
        "device_id": "text",
        "metric": "text",
        "ws": "timestamp",
        "avg": "double",
        "day": "date",
    }
    assert (layout.partition_key, layout.clustering) == (("device_id", "day"), ("ws",))
    ignored = one("UPSERT INTO t SELECT * FROM x IGNORE stddev AUTOCREATE")
    assert "stddev" not in autocreate_layout(ignored, TableName("k", "t")).columns


def test_autocreate_makes_a_headers_column_text_and_refuses_a_key_field_it_cannot_type() -> None:
    # A header's type is the record's (SimpleHeaderConverter's reading of its text, kcql._header), so its
    # column is text, which takes the header's text (RowBinder); a key's fields have no type before a record.
    headers = one("UPSERT INTO t SELECT *, _header.gw AS gateway, _header.fluxgate.source FROM x AUTOCREATE")
    columns = autocreate_layout(headers, TableName("k", "t")).columns
    assert (columns["gateway"], columns["source"]) == ("text", "text")
    keyed = one("UPSERT INTO t SELECT *, _key.site AS site FROM x AUTOCREATE")
    with pytest.raises(KcqlError, match=r"AUTOCREATE knows TemperatureAggregate's fields, not _key\.site"):
        autocreate_layout(keyed, TableName("k", "t"))


def test_a_header_binds_its_typed_value_to_a_typed_column_and_its_text_to_a_text_column() -> None:
    # Statement.project reads "042" as SimpleHeaderConverter does, the int 42; a text column keeps "042".
    statement = one("INSERT INTO t SELECT device_id, _header.n AS n, _header.n AS raw, _header.s AS s FROM x")
    types = {"device_id": "text", "n": "int", "raw": "text", "s": "text"}
    binder = RowBinder(TableName("k", "t"), list(types), statement, types=types)
    headers = (("n", b"042"), ("s", b"gw-1"))
    source = record("x", 0, 0, aggregate())._replace(headers=headers)
    [routed] = Router([statement]).route([source]).items
    assert routed.document == {"device_id": "Sensor4", "n": 42, "raw": 42, "s": "gw-1"}
    assert binder.values(routed) == ["Sensor4", 42, "042", "gw-1"]


def test_a_pk_without_the_event_time_cannot_make_the_table() -> None:
    statement = one("UPSERT INTO t SELECT * FROM x PK device_id AUTOCREATE")
    with pytest.raises(KcqlError, match="PK must include window_start"):
        autocreate_layout(statement, TableName("k", "t"))


def test_values_in_column_order_with_the_utc_day() -> None:
    statement = one("INSERT INTO t SELECT * FROM x AUTOCREATE")
    layout = autocreate_layout(statement, TableName("k", "t"))
    binder = RowBinder(layout.name, list(layout.columns), statement)
    values = dict(zip(layout.columns, binder.values(item(statement, aggregate(unit=None))), strict=True))
    assert values["day"] == date(2026, 3, 14)
    assert values["window_start"] == START and values["count"] == 3
    assert values["unit"] is None  # INSERT replaces the row: a null clears the column


def test_upsert_leaves_null_and_absent_fields_unset() -> None:
    statement = one("UPSERT INTO t SELECT device_id, metric, window_start, unit FROM x")
    binder = RowBinder(TableName("k", "t"), ["device_id", "metric", "day", "window_start", "mean", "unit"], statement)
    values = binder.values(item(statement, aggregate(unit=None)))
    assert values == ["Sensor4", "temperature", date(2026, 3, 14), START, UNSET_VALUE, UNSET_VALUE]


@pytest.mark.parametrize("mode", ["INSERT", "UPSERT"])
def test_default_value_null_writes_null_into_absent_and_null_fields_as_stream_reactors_json_insert(mode: str) -> None:
    # CassandraJsonWriter.scala: INSERT INTO t JSON ? (no DEFAULT UNSET), whatever the KCQL's write mode.
    statement = one(f"{mode} INTO t SELECT device_id, metric, window_start, unit FROM x")
    columns = ["device_id", "metric", "day", "window_start", "mean", "unit"]
    binder = RowBinder(TableName("k", "t"), columns, statement, default_value="NULL")
    values = binder.values(item(statement, aggregate(unit=None)))
    assert values == ["Sensor4", "temperature", date(2026, 3, 14), START, None, None]


def test_default_value_unset_leaves_absent_columns_and_writes_a_null_field_on_insert() -> None:
    statement = one("INSERT INTO t SELECT device_id, metric, window_start, unit FROM x")
    columns = ["device_id", "metric", "day", "window_start", "mean", "unit"]
    binder = RowBinder(TableName("k", "t"), columns, statement, default_value="UNSET")
    values = binder.values(item(statement, aggregate(unit=None)))
    assert values == ["Sensor4", "temperature", date(2026, 3, 14), START, UNSET_VALUE, None]


def test_from_a_connector_config_upsert_writes_a_null_field_under_unset_as_stream_reactors_json_insert() -> None:
    # CassandraJsonWriter.scala ignores KCQL's write mode: DEFAULT UNSET leaves only absent keys unset.
    statement = one("UPSERT INTO t SELECT device_id, metric, window_start, unit FROM x")
    columns = ["device_id", "metric", "day", "window_start", "mean", "unit"]
    binder = RowBinder(TableName("k", "t"), columns, statement, match="stream-reactor", default_value="UNSET")
    values = binder.values(item(statement, aggregate(unit=None)))
    assert values == ["Sensor4", "temperature", date(2026, 3, 14), START, UNSET_VALUE, None]


def test_a_field_that_is_no_column_fails_the_item_naming_it() -> None:
    statement = one("UPSERT INTO t SELECT * FROM x")
    binder = RowBinder(TableName("k", "t"), ["device_id", "metric", "window_start"], statement)
    with pytest.raises(SinkError, match=r"count, first_event_time, .* not a column of k.t") as caught:
        binder.values(item(statement, aggregate()))
    assert not caught.value.retriable


def test_an_explicit_select_of_a_missing_column_fails_at_start() -> None:
    statement = one("UPSERT INTO t SELECT device_id, mean AS avg FROM x")
    with pytest.raises(KcqlError, match=r"k\.t has no column avg"):
        RowBinder(TableName("k", "t"), ["device_id", "mean"], statement).check_selected(statement)


def test_rows_are_keyed_by_their_columns_so_the_router_makes_no_id_and_hands_records_on_whole() -> None:

    from fluxgate_scylla_persister.settings import DEFAULT_KCQL
    from fluxgate_sink.kcql import parse

    sink = ScyllaSink(ConnectionSettings(), cluster=object())  # type: ignore[arg-type]
    records = [record("temperatures.aggregated", 0, n, minute_aggregate(f"d{n}", n)) for n in range(3)]
    items = Router(parse(DEFAULT_KCQL), sink.needs_ids).route(records).items
    assert [item.id for item in items] == ["", "", ""]
    assert [item.document for item in items] == [r.record for r in records]
    assert all(item.document is r.record for item, r in zip(items, records, strict=True))  # not a copy


@pytest.mark.parametrize(
    ("header_format", "cql"),
    [("simple", "text"), ("string", "text"), ("json", "text"), ("bytearray", "blob"), ("long", "bigint"),
     ("integer", "int"), ("short", "smallint"), ("float", "float"), ("double", "double"), ("boolean", "boolean")],
)  # fmt: skip
def test_autocreate_types_a_headers_column_as_its_header_converter_types_the_header(
    header_format: HeaderFormat, cql: str
) -> None:
    # The Connect type each converter's toConnectHeader gives (connect 4.4.0): BYTES, INT64 ... as the
    # Avro field of that type would be (consumed.cql_type); text where each header may be any type.
    statement = one("UPSERT INTO t SELECT *, _header.gw AS gateway FROM x AUTOCREATE")
    assert autocreate_layout(statement, TableName("k", "t"), header_format).columns["gateway"] == cql


def _header_row(header_format: HeaderFormat, types: dict[str, str], headers: tuple[tuple[str, bytes], ...]) -> Any:
    statement = one("INSERT INTO t SELECT device_id, _header.h AS h FROM x")
    binder = RowBinder(TableName("k", "t"), list(types), statement, types=types, header_format=header_format)
    source = record("x", 0, 0, aggregate())._replace(headers=headers)
    [routed] = Router([statement], read_header=header_reader(header_format, False)).route([source]).items
    return binder.values(routed)


def test_a_bytearray_header_binds_its_bytes_to_a_blob_column() -> None:
    assert _header_row("bytearray", {"device_id": "text", "h": "blob"}, (("h", b"\x00\xff"),)) == [
        "Sensor4",
        b"\x00\xff",
    ]


def test_only_simple_header_converters_typed_value_gives_way_to_the_headers_text_in_a_text_column() -> None:
    # SimpleHeaderConverter typed "42" from its text, which a text column takes; JsonConverter's 42 is a
    # number as a value field's, bound as it is (the driver refuses a number for text, failing the record).
    text = {"device_id": "text", "h": "text"}
    assert _header_row("simple", text, (("h", b"42"),)) == ["Sensor4", "42"]
    assert _header_row("json", text, (("h", b"42"),)) == ["Sensor4", 42]
    assert _header_row("json", text, (("h", b'"gw-1"'),)) == ["Sensor4", "gw-1"]


def test_the_sink_makes_its_tables_and_rows_with_the_sinks_header_format(monkeypatch: pytest.MonkeyPatch) -> None:
    from fluxgate_scylla_persister import app
    from fluxgate_scylla_persister.settings import ScyllaSettings

    made: dict[str, Any] = {}
    monkeypatch.setattr(app, "ScyllaSink", lambda *args, **kwargs: made.update(kwargs))
    monkeypatch.setattr(app, "writer_fields", lambda registry: None)
    app.make_sink(ScyllaSettings(sink={"kcql": DEFAULT_KCQL, "header_format": "bytearray"}))  # type: ignore[arg-type]
    assert made["header_format"] == "bytearray"
