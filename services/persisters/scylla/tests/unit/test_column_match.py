"""Fields to columns in both modes: fluxgate (exact names, our services) and stream-reactor (as the
JSON insert of Stream-Reactor's Cassandra sink: unquoted names lower-cased, quoted ones exact)."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra.query import UNSET_VALUE
from scylla_store import any_item

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.table import (
    ColumnMatch,
    Layout,
    RowBinder,
    TableName,
    json_insert_column,
    json_insert_row,
    stream_reactor_10_options,
    table_name,
)
from fluxgate_sink.errors import KcqlError, SinkError
from fluxgate_sink.formats import key_reader
from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.kcql_routing import Router
from fluxgate_sink.sink import SinkItem

NAME = TableName("k", "t")
EVENT_MS = 1_700_000_000_000
EVENT_US = EVENT_MS * 1000  # a record's write time under Stream-Reactor 10.x


def one(kcql: str) -> Statement:
    (statement,) = parse(kcql)
    return statement


def sink_item(statement: Statement, record: dict[str, Any]) -> SinkItem:
    return any_item(statement, record, timestamp_ms=EVENT_MS)


def reading(**fields: Any) -> dict[str, Any]:
    return {"DeviceId": "d1", "Temp": 21.5, "event_time": EVENT_MS, **fields}


def bound(kcql: str, columns: list[str], record: dict[str, Any], match: ColumnMatch) -> dict[str, Any]:
    statement = one(kcql)
    binder = RowBinder(NAME, columns, statement, match=match)
    values = binder.values(sink_item(statement, record))
    if match == "stream-reactor-10":  # its write time last: the record's timestamp in microseconds
        assert values.pop() == EVENT_US
    return dict(zip(columns, values, strict=True))


@pytest.mark.parametrize(
    ("key", "column"),
    [
        ("deviceid", "deviceid"),
        ("DeviceId", "deviceid"),
        ("DEVICE_ID", "device_id"),
        ('"DeviceId"', "DeviceId"),  # quoted: exact, quotes removed
        ('"deviceid"', "deviceid"),
        ('"', '"'),  # one quote is no quoted name
        ("Ünit", "ünit"),
    ],
)
def test_a_json_insert_key_lands_in_its_column_as_cassandra_folds_it(key: str, column: str) -> None:
    assert json_insert_column(key) == column


def test_two_fields_folding_to_one_column_fail_the_record_naming_both() -> None:
    with pytest.raises(SinkError, match="DeviceId, deviceid: both fields go to column deviceid"):
        json_insert_row({"DeviceId": "a", "deviceid": "b"})
    assert json_insert_row({'"DeviceId"': "a", "deviceid": "b"}) == {"DeviceId": "a", "deviceid": "b"}


def test_stream_reactor_writes_mixed_case_fields_into_lower_case_columns() -> None:
    values = bound(
        "INSERT INTO t SELECT * FROM x", ["deviceid", "temp", "event_time"], reading(), match="stream-reactor"
    )
    assert values == {"deviceid": "d1", "temp": 21.5, "event_time": EVENT_MS}


def test_fluxgate_matches_by_exact_name_so_a_mixed_case_field_is_no_lower_case_column() -> None:
    statement = one("INSERT INTO t SELECT * FROM x")
    binder = RowBinder(NAME, ["deviceid", "temp", "event_time"], statement)
    with pytest.raises(SinkError, match=r"DeviceId, Temp: not a column of k\.t"):
        binder.values(sink_item(statement, reading()))


def test_a_quoted_column_takes_a_quoted_field_in_stream_reactor_and_its_exact_name_in_fluxgate() -> None:
    columns = ["DeviceId", "temp", "event_time"]  # CREATE TABLE t ("DeviceId" text, temp double, ...)
    quoted = {'"DeviceId"': "d1", "Temp": 21.5, "event_time": EVENT_MS}
    assert bound("INSERT INTO t SELECT * FROM x", columns, quoted, "stream-reactor")["DeviceId"] == "d1"
    exact = bound("INSERT INTO t SELECT * FROM x", ["DeviceId", "Temp", "event_time"], reading(), "fluxgate")
    assert exact == {"DeviceId": "d1", "Temp": 21.5, "event_time": EVENT_MS}
    statement = one("INSERT INTO t SELECT * FROM x")
    binder = RowBinder(NAME, columns, statement, match="stream-reactor")
    with pytest.raises(SinkError, match=r"deviceid: not a column of k\.t"):  # unquoted DeviceId folds to deviceid
        binder.values(sink_item(statement, reading()))


def test_an_alias_is_folded_like_a_field_name() -> None:
    values = bound(
        "INSERT INTO t SELECT DeviceId AS Device, Temp, event_time FROM x",
        ["device", "temp", "event_time"],
        reading(),
        match="stream-reactor",
    )
    assert values == {"device": "d1", "temp": 21.5, "event_time": EVENT_MS}


def test_a_field_without_a_column_fails_its_record_in_both_modes() -> None:
    statement = one("INSERT INTO t SELECT * FROM x")
    for match, named in (("fluxgate", "Extra"), ("stream-reactor", "extra")):
        binder = RowBinder(NAME, ["deviceid", "DeviceId", "Temp", "temp", "event_time"], statement, match=match)
        with pytest.raises(SinkError, match=rf"^{named}: not a column of k\.t"):
            binder.values(sink_item(statement, reading(Extra=1)))


def test_a_column_without_a_field_is_left_unset_in_both_modes() -> None:
    for match, columns in (("fluxgate", ["DeviceId", "Temp"]), ("stream-reactor", ["deviceid", "temp"])):
        values = bound("INSERT INTO t SELECT * FROM x", [*columns, "event_time", "unit"], reading(), match)
        assert values["unit"] is UNSET_VALUE


def test_an_explicit_select_is_checked_against_the_folded_columns_at_start() -> None:
    statement = one("INSERT INTO t SELECT DeviceId, Temp AS TempC FROM x")
    RowBinder(NAME, ["deviceid", "tempc"], statement, match="stream-reactor").check_selected(statement)
    with pytest.raises(KcqlError, match=r"k\.t has no column DeviceId, TempC"):
        RowBinder(NAME, ["deviceid", "tempc"], statement).check_selected(statement)


def test_the_target_table_is_folded_only_for_stream_reactor() -> None:
    assert table_name("Sensors.Readings", "ks") == TableName("Sensors", "Readings")
    assert table_name("Sensors.Readings", "ks", "stream-reactor") == TableName("sensors", "readings")
    assert table_name("Readings", "Demo", "stream-reactor") == TableName("demo", "readings")


def test_fluxgate_is_the_default_match() -> None:
    assert ConnectionSettings().column_match == "fluxgate"
    assert ConnectionSettings(column_match="stream-reactor").column_match == "stream-reactor"


# Stream-Reactor 10.x (io.lenses.streamreactor.connect.cassandra.CassandraSinkConnector) writes through
# DataStax's connector: CassandraSettings.scala makes each named SELECT field a mapping entry
# "<alias>"="value.<field>", both quoted, so DataStax's MappingInspector.java takes the column exactly
# (CqlIdentifier.fromCql of a quoted name), and LifeCycleManager.validateMappingColumns refuses at start a
# mapped column the table lacks or a primary-key column left unmapped. `*` makes no entry at all.
SR10 = "stream-reactor-10"


def test_stream_reactor_10_writes_a_field_into_the_column_of_its_exact_name() -> None:
    columns = ["deviceId", "temp", "event_time"]  # CREATE TABLE t ("deviceId" text, temp double, ...)
    record = {"deviceId": "d1", "Temp": 21.5, "event_time": EVENT_MS}
    values = bound("INSERT INTO k.t SELECT deviceId, Temp AS temp, event_time FROM x", columns, record, SR10)
    assert values == {"deviceId": "d1", "temp": 21.5, "event_time": EVENT_MS}


def test_stream_reactor_10_refuses_at_start_a_mixed_case_name_against_a_lower_case_column() -> None:
    statement = one("INSERT INTO k.t SELECT deviceId, temp FROM x")
    binder = RowBinder(NAME, ["deviceid", "temp"], statement, match=SR10)
    with pytest.raises(KcqlError, match=r"k\.t has no column deviceId"):
        binder.check_selected(statement, primary_key=("deviceid",))


@pytest.mark.parametrize("select", ["*", "*, deviceId", "deviceId, payload.*"])
def test_stream_reactor_10_refuses_a_wildcard_at_start_as_it_maps_none(select: str) -> None:
    statement = one(f"INSERT INTO k.t SELECT {select} FROM x")
    binder = RowBinder(NAME, ["deviceId", "payload"], statement, match=SR10)
    with pytest.raises(KcqlError, match=r"Stream-Reactor 10\.x maps only the fields a SELECT names"):
        binder.check_selected(statement, primary_key=("deviceId",))


def test_stream_reactor_10_refuses_at_start_a_primary_key_column_no_field_writes() -> None:
    statement = one("INSERT INTO k.t SELECT deviceId, temp FROM x")
    binder = RowBinder(NAME, ["deviceId", "temp", "seen"], statement, match=SR10)
    with pytest.raises(KcqlError, match=r"primary key column\(s\) seen: no field of the SELECT writes them"):
        binder.check_selected(statement, primary_key=("deviceId", "seen"))
    binder.check_selected(statement, primary_key=("deviceId",))  # a non-key column may stay unmapped


def test_stream_reactor_10_writes_a_null_field_as_unset_whatever_the_mode() -> None:
    # DataStax's TableConfig.java: nullToUnset, default true; the KCQL mode is not read.
    statement = one("INSERT INTO k.t SELECT deviceId, temp FROM x")
    binder = RowBinder(NAME, ["deviceId", "temp", "unit"], statement, match=SR10, default_value="UNSET")
    assert binder.values(sink_item(statement, {"deviceId": "d1", "temp": None})) == [
        "d1",
        UNSET_VALUE,
        UNSET_VALUE,
        EVENT_US,
    ]


def test_stream_reactor_10_needs_a_keyspace_in_the_target_and_keeps_its_case() -> None:
    # CassandraSettings.scala, fromKcql: namespace.table, each ^[a-zA-Z][a-zA-Z0-9_]{0,47}$; DataStax's
    # TableConfig.parseLoosely takes an unquoted name exactly.
    assert table_name("Sensors.Readings", "ks", SR10) == TableName("Sensors", "Readings")
    with pytest.raises(KcqlError, match=r"Readings: Stream-Reactor 10\.x needs keyspace\.table"):
        table_name("Readings", "ks", SR10)
    for bad in ("ks.1table", "ks.t-1", "_ks.t", f"ks.{'t' * 49}"):
        with pytest.raises(KcqlError, match="letter, then letters, digits or _, 48 at most"):
            table_name(bad, "ks", SR10)


def test_stream_reactor_10_names_a_nested_field_without_as_by_its_last_name() -> None:
    # io/lenses/kcql/Field.java: a field's alias is its name (the last of a.b) unless AS gives one;
    # CassandraSettings.scala maps "b"="value.a.b".
    statement = one("INSERT INTO k.t SELECT id, a.b FROM x PROPERTIES(deletesEnabled=false)")
    binder = RowBinder(NAME, ["id", "b"], statement, match=SR10)
    binder.check_selected(statement, primary_key=("id",))
    assert binder.values(sink_item(statement, {"id": "d1", "a": {"b": 2}})) == ["d1", 2, EVENT_US]


@pytest.mark.parametrize(
    ("select", "named"),
    [
        ("id, _header", r"_header: Stream-Reactor 10\.x refuses it too"),
        ("id, _value", r"_value: Stream-Reactor 10\.x writes the whole record value to that one column"),
    ],
)
def test_stream_reactor_10_refuses_a_bare_header_or_value_at_start(select: str, named: str) -> None:
    # CassandraSettings.scala (getTopicMappings): a bare _header fails its start; a bare _value maps "c"="value".
    statement = one(f"INSERT INTO k.t SELECT {select} FROM x")
    binder = RowBinder(NAME, ["id", "_header", "_value", "other"], statement, match=SR10)
    with pytest.raises(KcqlError, match=named):
        binder.check_selected(statement, primary_key=("id",))


def test_stream_reactor_10_writes_key_fields_headers_and_value_prefixed_fields() -> None:
    # CassandraSettings.scala (getTopicMappings): _key.x is DataStax's key.x, _header.h header.h, _value.x value.x;
    # each column named by AS or the last name (Field.java), as any field.
    statement = one(
        "INSERT INTO k.t SELECT id, _key.site AS k, _header.h, _value.v FROM x PROPERTIES(deletesEnabled=false)"
    )
    binder = RowBinder(NAME, ["id", "k", "h", "v"], statement, match=SR10)
    binder.check_selected(statement, primary_key=("id",))
    value = {"id": "d1", "v": 2, "event_time": EVENT_MS}
    source = ConsumedRecord("x", 0, 0, b'{"site": "s1"}', b"", (("h", b"gw-1"),), EVENT_MS, value)
    [item] = Router([statement], read_key=key_reader("json", schemas_enable=False)).route([source]).items
    assert binder.values(item) == ["d1", "s1", "gw-1", 2, EVENT_US]


def test_stream_reactor_10_a_bare_key_is_a_value_field_there_as_here() -> None:
    statement = one("INSERT INTO k.t SELECT id, _key FROM x")
    RowBinder(NAME, ["id", "_key", "other"], statement, match=SR10).check_selected(statement, primary_key=("id",))


def test_stream_reactor_10_deletes_the_row_of_a_record_whose_non_key_fields_are_null_when_every_column_is_mapped() -> (
    None
):
    # LifeCycleManager.java prepares a DELETE when deletesEnabled (default true) and every column is
    # mapped; RecordMapper.isInsertUpdate runs it for a record whose non-key fields are all null.
    statement = one("INSERT INTO k.t SELECT id, temp, unit FROM x")

    def binder(columns: list[str], primary_key: tuple[str, ...], kcql: Statement = statement) -> RowBinder:
        made = RowBinder(NAME, columns, kcql, match=SR10)
        made.check_selected(kcql, primary_key=primary_key)
        return made

    full = binder(["id", "temp", "unit"], ("id",))
    nulls = {"id": "d1", "temp": None, "unit": None}  # a field the SELECT names and the record lacks fails anyway
    assert full.deletes
    assert full.deleted(sink_item(statement, nulls))
    assert full.key_values(sink_item(statement, nulls)) == [EVENT_US, "d1"]  # DELETE ... USING TIMESTAMP ? WHERE id = ?
    written = sink_item(statement, {**nulls, "temp": 1.0})
    assert not full.deleted(written)
    assert full.values(written) == ["d1", 1.0, UNSET_VALUE, EVENT_US]
    partial = binder(["id", "temp", "unit", "other"], ("id",))  # not every column mapped: no DELETE there
    assert not partial.deletes
    assert not partial.deleted(sink_item(statement, nulls))
    assert partial.values(sink_item(statement, nulls)) == ["d1", UNSET_VALUE, UNSET_VALUE, UNSET_VALUE, EVENT_US]
    keys_only = binder(["id", "temp", "unit"], ("id", "temp", "unit"))  # a table of key columns: never deleted
    assert not keys_only.deletes
    off = one("INSERT INTO k.t SELECT id, temp, unit FROM x PROPERTIES(deletesEnabled=FALSE)")
    assert not binder(["id", "temp", "unit"], ("id",), off).deletes


def test_stream_reactor_10_times_a_write_by_its_record_and_leaves_one_without_a_timestamp_unset() -> None:
    # RecordMapper.java binds record.getTimestamp() * 1000 when the record has one, nothing otherwise.
    statement = one("INSERT INTO k.t SELECT id, temp FROM x")
    binder = RowBinder(NAME, ["id", "temp"], statement, match=SR10)
    untimed = any_item(statement, {"id": "d1", "temp": 1.0}, timestamp_ms=-1)
    assert binder.values(untimed) == ["d1", 1.0, UNSET_VALUE]
    assert RowBinder(NAME, ["id", "temp"], statement).values(sink_item(statement, {"id": "d1", "temp": 1.0})) == [
        "d1",
        1.0,
    ]  # our services: the driver's write time


def test_layout_writes_the_insert_and_delete_of_a_timed_table() -> None:
    layout = Layout(NAME, {"id": "text", "at": "timestamp", "v": "int"}, ("id",), ("at",))
    assert layout.insert_cql(None, timestamped=True) == "INSERT INTO k.t (id, at, v) VALUES (?, ?, ?) USING TIMESTAMP ?"
    assert layout.insert_cql(60, timestamped=True).endswith("USING TIMESTAMP ? AND TTL 60")
    assert layout.insert_cql(60).endswith("VALUES (?, ?, ?) USING TTL 60")
    assert layout.delete_cql() == "DELETE FROM k.t USING TIMESTAMP ? WHERE id = ? AND at = ?"


def test_stream_reactor_10_null_to_unset_false_writes_a_null_field_as_null_and_leaves_unmapped_columns() -> None:
    # TableConfig.java nullToUnset; RecordMapper.bindColumn binds the null then. Unmapped columns are
    # not in DataStax's INSERT at all.
    statement = one("INSERT INTO k.t SELECT deviceId, temp FROM x PROPERTIES(nullToUnset=false)")
    binder = RowBinder(NAME, ["deviceId", "temp", "unit"], statement, match=SR10, default_value="UNSET")
    assert binder.values(sink_item(statement, {"deviceId": "d1", "temp": None})) == ["d1", None, UNSET_VALUE, EVENT_US]


@pytest.mark.parametrize(
    ("props", "ttl"),
    [("", None), ("PROPERTIES(ttl=3600)", 3600), ("PROPERTIES(ttl=-1)", None), ("PROPERTIES(ttl=0)", None)],
)
def test_stream_reactor_10_takes_the_ttl_from_properties(props: str, ttl: int | None) -> None:
    # TableConfig.java: ttl, -1 (none) by default, in ttlTimeUnit (SECONDS); LifeCycleManager.appendTtl.
    statement = one(f"INSERT INTO k.t SELECT a FROM x {props}")
    assert stream_reactor_10_options(statement).ttl == ttl
    assert RowBinder(NAME, ["a", "b"], statement, match=SR10).options.ttl == ttl


def test_stream_reactor_10_refuses_properties_it_cannot_honour_all_at_once() -> None:
    statement = one("INSERT INTO k.t SELECT a FROM x PROPERTIES(query='UPDATE k.t SET b=1', consistencyLevel=SERIAL)")
    with pytest.raises(KcqlError, match=r"consistencyLevel=SERIAL: one of .*; query: not supported"):
        RowBinder(NAME, ["a", "b"], statement, match=SR10)
    RowBinder(NAME, ["a", "b"], statement)  # fluxgate matching reads no such properties


class _Prepared:
    def __init__(self, cql: str) -> None:
        self.cql = cql


def _sink_writer(kcql: str, consistency: str = "LOCAL_ONE") -> Any:
    from fluxgate_scylla_persister.sink import ScyllaSink
    from fluxgate_scylla_persister.table import Layout

    settings = ConnectionSettings(column_match=SR10, consistency=consistency)  # type: ignore[arg-type]
    sink = ScyllaSink(settings, cluster=object())  # type: ignore[arg-type]
    layout = Layout(NAME, {"id": "text", "temp": "double", "unit": "text"}, ("id",), ())
    sink._existing = lambda name: layout  # type: ignore[method-assign]
    sink._ddl = lambda cql, name, prepare=False: _Prepared(cql)  # type: ignore[method-assign]
    return sink._writer(one(kcql), NAME)


def test_stream_reactor_10_insert_carries_the_properties_ttl() -> None:
    writer = _sink_writer("INSERT INTO k.t SELECT id, temp FROM x PROPERTIES(ttl=60)")
    assert writer.prepared.cql.endswith("USING TIMESTAMP ? AND TTL 60")


def test_stream_reactor_10_refuses_a_consistency_level_other_than_the_persisters() -> None:
    with pytest.raises(KcqlError, match=r"consistencyLevel=QUORUM.*CONSISTENCY=LOCAL_ONE: set it to QUORUM"):
        _sink_writer("INSERT INTO k.t SELECT id, temp FROM x PROPERTIES(consistencyLevel=quorum)")
    _sink_writer("INSERT INTO k.t SELECT id, temp FROM x PROPERTIES(consistencyLevel=quorum)", consistency="QUORUM")
