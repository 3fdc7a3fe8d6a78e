"""``scylla.default_value`` against the stack's real Cassandra: a record lacking a column's field
writes null into it under NULL (Stream-Reactor's Cassandra sink's default, its JSON insert without
DEFAULT UNSET, CassandraJsonWriter.scala), overwriting what an earlier record wrote, and leaves the
earlier value under UNSET (ours, and its connect.cassandra.default.value=UNSET)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from cassandra.cluster import Session
from scylla_store import any_item, statement

from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink

pytestmark = pytest.mark.integration
EVENT_MS = 1_700_000_000_000


@pytest.fixture
async def connected(settings_for: Callable[..., ConnectionSettings]) -> AsyncIterator[Callable[..., ScyllaSink]]:
    made: list[ScyllaSink] = []

    def make(**changes: Any) -> ScyllaSink:
        made.append(ScyllaSink(settings_for(request_timeout_s=30, **changes)))
        return made[-1]

    yield make
    for sink in made:
        await sink.close()


@pytest.mark.parametrize(("default_value", "unit_after"), [("NULL", None), ("UNSET", "Cel")])
async def test_a_record_missing_a_column_clears_it_under_null_and_leaves_it_under_unset(
    connected: Callable[..., ScyllaSink], cql: Session, target: str, default_value: str, unit_after: str | None
) -> None:
    cql.execute(f"CREATE TABLE {target} (deviceid text PRIMARY KEY, temp double, unit text)")
    sink = connected(column_match="stream-reactor", default_value=default_value)
    stmt = statement(f"INSERT INTO {target} SELECT * FROM readings")
    await sink.setup([stmt])
    first = {"DeviceId": "d1", "Temp": 20.5, "Unit": "Cel"}
    assert await sink.write_batch([any_item(stmt, first, 0, timestamp_ms=EVENT_MS)]) == []
    second = {"DeviceId": "d1", "Temp": 21.5}  # no Unit: the column is the one in question
    assert await sink.write_batch([any_item(stmt, second, 1, timestamp_ms=EVENT_MS + 1)]) == []
    (row,) = cql.execute(f"SELECT deviceid, temp, unit FROM {target}").all()
    assert tuple(row) == ("d1", 21.5, unit_after)
