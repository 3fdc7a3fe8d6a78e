"""Fields to columns in both modes: fluxgate (exact names, our services) and stream-reactor (as the
JSON insert of Stream-Reactor's Cassandra sink: unquoted names lower-cased, quoted ones exact)."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra.query import UNSET_VALUE
from scylla_store import any_item

from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.table import (
    ColumnMatch,
    RowBinder,
    TableName,
    json_insert_column,
    json_insert_row,
    table_name,
)
from fluxgate_sink.errors import KcqlError, SinkError
from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.sink import SinkItem

NAME = TableName("k", "t")
EVENT_MS = 1_700_000_000_000


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
    return dict(zip(columns, binder.values(sink_item(statement, record)), strict=True))


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
