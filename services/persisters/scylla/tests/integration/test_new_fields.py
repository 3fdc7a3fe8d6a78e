"""A compatible TemperatureAggregate rollout against the real server: v1 aggregates, then v2
ones with a new optional field. With AUTOCREATE the column is added once, by whichever
persister meets it first (two race for it here), and every row is written with it; nothing
fails. A field AUTOCREATE cannot type fails its record alone, saying why. Without
AUTOCREATE, a column added by hand is taken without a restart."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cassandra.cluster import Session
from fluxgate_testing.sink.items import sink_item
from scylla_store import aggregate, statement

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink
from fluxgate_sink.kcql import Statement
from fluxgate_sink.sink import SinkItem

pytestmark = pytest.mark.integration
START = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
V1, V2, V3 = 901, 902, 903  # writer schema ids, as the registry would give them
FIELDS = {field["name"]: field["type"] for field in schema_dict(TEMPERATURE_AGGREGATE)["fields"]}
SCHEMAS: Mapping[int, Mapping[str, Any]] = {
    V1: FIELDS,
    V2: {**FIELDS, "firmware": ["null", "string"]},
    V3: {**FIELDS, "firmware": ["null", "string"], "tags": {"type": "array", "items": "string"}},
}


def written_with(stmt: Statement, schema: int, records: list[dict[str, Any]], first: int = 0) -> list[SinkItem]:
    """Items as the runner hands them over: the value starts with its writer schema's id."""
    value = struct.pack(">bI", 0, schema) + b"avro body"
    return [sink_item(stmt, record, first + n, value=value) for n, record in enumerate(records)]


def windows(devices: range, minutes: range, **changes: Any) -> list[dict[str, Any]]:
    return [aggregate(f"d{d}", START + timedelta(minutes=m), **changes) for d in devices for m in minutes]


async def test_v2_aggregates_add_their_column_once_and_every_row_is_written(
    cql: Session, target: str, settings_for: Callable[..., ConnectionSettings]
) -> None:
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")
    first, second = (ScyllaSink(settings_for(), writer_fields=SCHEMAS.__getitem__) for _ in range(2))
    try:
        await first.setup([stmt])
        await second.setup([stmt])
        assert await first.write_batch(written_with(stmt, V1, windows(range(4), range(5)))) == []
        # Two persisters meet the new field at once: one adds the column, the other finds it.
        halves = (range(2), range(2, 4))
        v2 = [written_with(stmt, V2, windows(devices, range(5, 10), firmware="2.1"), 100) for devices in halves]
        results = await asyncio.gather(first.write_batch(v2[0]), second.write_batch(v2[1]))
        assert results == [[], []]
        # v1 and v2 keep arriving in any mix, on the widened statement.
        mixed = written_with(stmt, V1, windows(range(4), range(10, 12))) + written_with(
            stmt, V2, windows(range(4), range(12, 14), firmware="2.2"), 200
        )
        assert await second.write_batch(mixed) == []
    finally:
        await first.close()
        await second.close()
    rows = cql.execute(f"SELECT device_id, window_start, firmware FROM {target}").all()
    assert len(rows) == 4 * 14
    minute = timedelta(minutes=1)
    by_minute = {
        (row.device_id, (row.window_start.replace(tzinfo=UTC) - START) // minute): row.firmware for row in rows
    }
    assert {m: by_minute[("d3", m)] for m in range(14)} == {
        **dict.fromkeys(range(5), None), **dict.fromkeys(range(5, 10), "2.1"),
        **dict.fromkeys(range(10, 12), None), **dict.fromkeys(range(12, 14), "2.2"),
    }  # fmt: skip
    keyspace, table = target.split(".")
    (column,) = cql.execute(
        "SELECT type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s AND column_name = %s",
        (keyspace, table, "firmware"),
    ).all()
    assert column.type == "text"


async def test_a_field_autocreate_cannot_type_fails_its_record_alone_saying_why(
    sink: ScyllaSink, cql: Session, target: str, settings_for: Callable[..., ConnectionSettings]
) -> None:
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")
    typed = ScyllaSink(settings_for(), writer_fields=SCHEMAS.__getitem__)
    try:
        await typed.setup([stmt])
        batch = written_with(stmt, V2, windows(range(1), range(2), firmware="2.1"))
        batch += written_with(stmt, V3, windows(range(1), range(2, 3), firmware="2.1", tags=["a"]), 10)
        (failure,) = await typed.write_batch(batch)
    finally:
        await typed.close()
    assert failure.index == 2 and not failure.error.retriable
    assert str(failure.error) == (
        f"tags: not a column of {target}, and AUTOCREATE cannot add it: its Avro type"
        ' {"type": "array", "items": "string"} has no CQL type; add the column or IGNORE the field in KCQL'
    )
    assert len(cql.execute(f"SELECT * FROM {target}").all()) == 2


async def test_without_autocreate_a_column_added_by_hand_is_taken_without_a_restart(
    cql: Session, target: str, settings_for: Callable[..., ConnectionSettings]
) -> None:
    cql.execute(
        f"CREATE TABLE {target} (device_id text, metric text, day date, window_start timestamp, window_end timestamp,"
        " count bigint, min double, max double, mean double, stddev double, first_event_time timestamp,"
        " last_event_time timestamp, unit text, PRIMARY KEY ((device_id, metric, day), window_start))"
    )
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated")
    sink = ScyllaSink(settings_for(), writer_fields=SCHEMAS.__getitem__)
    try:
        await sink.setup([stmt])
        batch = written_with(stmt, V2, windows(range(1), range(1), firmware="2.1"))
        (failure,) = await sink.write_batch(batch)
        assert str(failure.error) == f"firmware: not a column of {target}; add the column or IGNORE the field in KCQL"
        cql.execute(f"ALTER TABLE {target} ADD firmware text")
        deadline = time.monotonic() + 30  # the driver learns it from the server's schema event
        while await sink.write_batch(batch):
            assert time.monotonic() < deadline, "the new column was never taken"
            await asyncio.sleep(0.5)
    finally:
        await sink.close()
    (row,) = cql.execute(f"SELECT firmware FROM {target}").all()
    assert row.firmware == "2.1"
