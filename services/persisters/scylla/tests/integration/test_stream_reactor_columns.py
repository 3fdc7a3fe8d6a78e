"""A record with mixed-case field names, written as Stream-Reactor's Cassandra sink writes it (its
JSON insert: unquoted names lower-cased, quoted ones exact), into the stack's real Cassandra."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from cassandra.cluster import Session
from fluxgate_testing.sink.items import sink_item
from scylla_store import aggregate, any_item, statement

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink, WriterFields
from fluxgate_sink.errors import KcqlError

pytestmark = pytest.mark.integration
EVENT_MS = 1_700_000_000_000
SCHEMA_ID = 911
FIELDS = {field["name"]: field["type"] for field in schema_dict(TEMPERATURE_AGGREGATE)["fields"]}


@pytest.fixture
async def connected(settings_for: Callable[..., ConnectionSettings]) -> AsyncIterator[Callable[..., ScyllaSink]]:
    """ScyllaSinks with the given settings, closed after the test."""
    made: list[ScyllaSink] = []

    def make(writer_fields: WriterFields | None = None, **changes: Any) -> ScyllaSink:
        made.append(ScyllaSink(settings_for(request_timeout_s=30, **changes), writer_fields=writer_fields))
        return made[-1]

    yield make
    for sink in made:
        await sink.close()


def readings_table(cql: Session, target: str) -> None:
    # Created as a Stream-Reactor user creates a table: unquoted names (stored lower-case), one quoted.
    cql.execute(f'CREATE TABLE {target} (deviceid text PRIMARY KEY, temp double, "Unit" text, seenat bigint)')


async def test_mixed_case_fields_are_written_into_their_folded_columns(
    connected: Callable[..., ScyllaSink], cql: Session, target: str
) -> None:
    readings_table(cql, target)
    sink = connected(column_match="stream-reactor")
    stmt = statement(f"INSERT INTO {target.upper()} SELECT * FROM readings")  # the table, folded as CQL folds it
    await sink.setup([stmt])
    record = {"DeviceId": "d1", "Temp": 21.5, '"Unit"': "Cel", "SeenAt": EVENT_MS}
    assert await sink.write_batch([any_item(stmt, record, timestamp_ms=EVENT_MS)]) == []
    (row,) = cql.execute(f'SELECT deviceid, temp, "Unit", seenat FROM {target}').all()
    assert tuple(row) == ("d1", 21.5, "Cel", EVENT_MS)


async def test_a_field_without_a_column_fails_its_record_alone(
    connected: Callable[..., ScyllaSink], cql: Session, target: str
) -> None:
    readings_table(cql, target)
    sink = connected(column_match="stream-reactor")
    stmt = statement(f"INSERT INTO {target} SELECT * FROM readings")
    await sink.setup([stmt])
    records = [{"DeviceId": "d1", "Temp": 1.0}, {"DeviceId": "d2", "Humidity": 40}, {"DeviceId": "d3", "deviceID": "x"}]
    failures = await sink.write_batch([any_item(stmt, r, offset) for offset, r in enumerate(records)])
    assert [(f.index, str(f.error)) for f in failures] == [
        (1, f"humidity: not a column of {target}; add the column or IGNORE the field in KCQL"),
        (2, "DeviceId, deviceID: both fields go to column deviceid; rename one (KCQL AS)"),
    ]
    assert [tuple(r) for r in cql.execute(f"SELECT deviceid, temp FROM {target}").all()] == [("d1", 1.0)]


async def test_our_default_matches_exact_names_only(
    connected: Callable[..., ScyllaSink], cql: Session, target: str
) -> None:
    readings_table(cql, target)
    sink = connected()
    stmt = statement(f"INSERT INTO {target} SELECT * FROM readings")
    await sink.setup([stmt])
    (failure,) = await sink.write_batch([any_item(stmt, {"DeviceId": "d1", "Temp": 1.0})])
    assert str(failure.error).startswith(f"DeviceId, Temp: not a column of {target}")
    assert await sink.write_batch([any_item(stmt, {"deviceid": "d1", "Unit": "Cel"})]) == []
    assert [tuple(r) for r in cql.execute(f'SELECT deviceid, "Unit" FROM {target}').all()] == [("d1", "Cel")]


async def test_autocreate_adds_a_mixed_case_field_by_its_folded_name_typed_from_its_writer_schema(
    connected: Callable[..., ScyllaSink], cql: Session, target: str
) -> None:
    schema = {**FIELDS, "FirmWare": ["null", "string"]}
    sink = connected(column_match="stream-reactor", writer_fields={SCHEMA_ID: schema}.__getitem__)
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")
    await sink.setup([stmt])
    record = aggregate("d1", datetime(2026, 11, 26, 12, 0, tzinfo=UTC), FirmWare="2.1")
    value = struct.pack(">bI", 0, SCHEMA_ID) + b"avro body"  # the writer schema id, as the wire format has it
    assert await sink.write_batch([sink_item(stmt, record, value=value)]) == []
    (row,) = cql.execute(f"SELECT device_id, firmware FROM {target}").all()
    assert tuple(row) == ("d1", "2.1")


# Stream-Reactor 10.x maps each named field to a quoted column ("<alias>"="value.<field>",
# CassandraSettings.scala), which DataStax's connector takes exactly (MappingInspector.java).
async def test_stream_reactor_10_writes_a_mixed_case_field_into_its_quoted_column(
    connected: Callable[..., ScyllaSink], cql: Session, target: str
) -> None:
    cql.execute(f'CREATE TABLE {target} ("deviceId" text PRIMARY KEY, temp double, unit text)')
    cql.execute(f"INSERT INTO {target} (\"deviceId\", unit) VALUES ('d1', 'Cel')")
    sink = connected(column_match="stream-reactor-10", default_value="UNSET")
    stmt = statement(f"INSERT INTO {target} SELECT deviceId, Temp AS temp, unit FROM readings")
    await sink.setup([stmt])
    record = {"deviceId": "d1", "Temp": 21.5, "unit": None}  # null: unset (DataStax's nullToUnset)
    assert await sink.write_batch([any_item(stmt, record, timestamp_ms=EVENT_MS)]) == []
    (row,) = cql.execute(f'SELECT "deviceId", temp, unit FROM {target}').all()
    assert tuple(row) == ("d1", 21.5, "Cel")


@pytest.mark.parametrize(
    ("select", "why"),
    [
        ("deviceId, temp", "has no column deviceId"),  # the column is deviceid: no folding in 10.x
        ("*", "maps only the fields a SELECT names"),
        ("temp", "primary key column\\(s\\) deviceid"),
    ],
)
async def test_stream_reactor_10_refuses_to_start_where_its_mapping_would_not_validate(
    connected: Callable[..., ScyllaSink], cql: Session, target: str, select: str, why: str
) -> None:
    cql.execute(f"CREATE TABLE {target} (deviceid text PRIMARY KEY, temp double)")
    sink = connected(column_match="stream-reactor-10")
    with pytest.raises(KcqlError, match=why):
        await sink.setup([statement(f"INSERT INTO {target} SELECT {select} FROM readings")])
