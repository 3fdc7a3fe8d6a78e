"""ScyllaSink against the real server: rows by device and time range, replay, TTL, refusals."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cassandra.cluster import Session
from fluxgate_testing import free_port
from scylla_store import aggregate, as_utc, items, statement

from fluxgate_core.errors import SettingRefused
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink
from fluxgate_sink.errors import SinkError, StoreUnavailable
from fluxgate_sink.formats import HeaderFormat, header_reader

pytestmark = pytest.mark.integration
START = datetime(2026, 3, 14, 23, 0, tzinfo=UTC)  # 90 one-minute windows: two days


def sent(devices: int = 3, windows: int = 90) -> list[dict[str, Any]]:
    return [
        aggregate(
            f"dev-{d}", START + timedelta(minutes=w), count=w + 1, mean=20.0 + w / 10, unit=None if w % 7 else "Cel"
        )
        for w in range(windows)
        for d in range(devices)
    ]


async def test_rows_queried_back_by_device_and_time_range_equal_what_was_sent(
    sink: ScyllaSink, cql: Session, target: str
) -> None:
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")
    await sink.setup([stmt])
    records = sent()
    assert await sink.write_batch(items(stmt, records)) == []
    begin, end = START + timedelta(minutes=30), START + timedelta(minutes=75)  # across midnight
    query = (
        f"SELECT * FROM {target} WHERE device_id = %s AND metric = %s AND day IN (%s, %s)"
        " AND window_start >= %s AND window_start < %s"
    )
    rows = cql.execute(query, ("dev-1", "temperature", begin.date(), end.date(), begin, end)).all()
    wanted = [r for r in records if r["device_id"] == "dev-1" and begin <= r["window_start"] < end]
    found = [{k: as_utc(v) for k, v in row._asdict().items() if k != "day"} for row in rows]
    assert sorted(found, key=lambda r: r["window_start"]) == wanted  # every field, null units included
    day_one = cql.execute(
        f"SELECT window_start FROM {target} WHERE device_id = 'dev-1' AND metric = 'temperature' AND day = %s",
        (START.date(),),
    ).all()
    assert [as_utc(r.window_start) for r in day_one] == [START + timedelta(minutes=w) for w in range(59, -1, -1)]


async def test_autocreate_adds_a_text_column_for_a_header_the_select_names(
    sink: ScyllaSink, cql: Session, target: str
) -> None:
    stmt = statement(f"UPSERT INTO {target} SELECT *, _header.gw AS gateway FROM temperatures.aggregated AUTOCREATE")
    await sink.setup([stmt])
    record = sent(devices=1, windows=1)[0]
    # The router's document: the record's fields and the header's value under its alias (Statement.project).
    [item] = items(statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated"), [record])
    assert await sink.write_batch([item._replace(statement=stmt, document={**record, "gateway": "hub-7"})]) == []
    assert [row.gateway for row in cql.execute(f"SELECT gateway FROM {target}")] == ["hub-7"]


async def test_a_header_kafka_connect_reads_as_a_number_is_written_as_its_text_into_its_text_column(
    sink: ScyllaSink, cql: Session, target: str
) -> None:
    # SimpleHeaderConverter reads "007" as the int 7 (Statement.project); the driver binds no int to
    # text, and AUTOCREATE's header column is text: the column takes the header's text.
    stmt = statement(f"UPSERT INTO {target} SELECT *, _header.gw AS gateway FROM temperatures.aggregated AUTOCREATE")
    await sink.setup([stmt])
    [item] = items(statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated"), sent(1, 1))
    headers = (("gw", b"007"),)
    document = stmt.project(item.source.record, None, headers)
    typed = item._replace(source=item.source._replace(headers=headers), statement=stmt, document=document)
    assert typed.document["gateway"] == 7
    assert await sink.write_batch([typed]) == []
    assert [row.gateway for row in cql.execute(f"SELECT gateway FROM {target}")] == ["007"]


@pytest.mark.parametrize(
    ("header_format", "raw", "column_type", "stored"),
    [("bytearray", b"\x00\x01\xfb", "blob", b"\x00\x01\xfb"), ("long", b"\x00" * 7 + b"\x07", "bigint", 7)],
)
async def test_autocreate_types_a_header_s_column_by_its_converter_and_writes_its_value(
    settings_for: Callable[..., ConnectionSettings],
    cql: Session,
    target: str,
    header_format: HeaderFormat,
    raw: bytes,
    column_type: str,
    stored: Any,
) -> None:
    sink = ScyllaSink(settings_for(request_timeout_s=10), header_format=header_format)
    try:
        stmt = statement(f"UPSERT INTO {target} SELECT *, _header.gw AS gw FROM temperatures.aggregated AUTOCREATE")
        await sink.setup([stmt])
        [item] = items(statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated"), sent(1, 1))
        headers = (("gw", raw),)
        document = stmt.project(item.source.record, None, headers, header_reader(header_format, True))
        typed = item._replace(source=item.source._replace(headers=headers), statement=stmt, document=document)
        assert await sink.write_batch([typed]) == []
    finally:
        await sink.close()
    keyspace, table = target.split(".")
    [kind] = cql.execute(
        "SELECT type FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s AND column_name = 'gw'",
        (keyspace, table),
    ).all()
    assert kind.type == column_type
    assert [row.gw for row in cql.execute(f"SELECT gw FROM {target}")] == [stored]


async def test_writing_the_same_records_again_changes_nothing(sink: ScyllaSink, cql: Session, target: str) -> None:
    stmt = statement(f"INSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")
    await sink.setup([stmt])
    records = sent(devices=2, windows=10)
    assert await sink.write_batch(items(stmt, records)) == []
    before = cql.execute(f"SELECT * FROM {target}").all()
    assert await sink.write_batch(items(stmt, records)) == []
    assert sorted(cql.execute(f"SELECT * FROM {target}").all()) == sorted(before) and len(before) == 20


async def test_ttl_expires_a_row(sink: ScyllaSink, cql: Session, target: str) -> None:
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE TTL=2")
    await sink.setup([stmt])
    assert await sink.write_batch(items(stmt, [aggregate("ttl-dev", START)])) == []
    (row,) = cql.execute(f"SELECT TTL(mean) AS ttl FROM {target}").all()
    assert 0 < row.ttl <= 2
    deadline = time.monotonic() + 10
    while cql.execute(f"SELECT * FROM {target}").all():
        assert time.monotonic() < deadline, "the row outlived its TTL"
        await asyncio.sleep(0.25)


async def test_a_statement_the_server_rejects_fails_alone(sink: ScyllaSink, cql: Session, target: str) -> None:
    # A user-made table clustered by unit: a null unit is a null key the server refuses.
    cql.execute(
        f"CREATE TABLE {target} (device_id text, day date, unit text, window_start timestamp, mean double,"
        " PRIMARY KEY ((device_id, day), unit, window_start))"
    )
    stmt = statement(f"INSERT INTO {target} SELECT device_id, window_start, unit, mean FROM temperatures.aggregated")
    await sink.setup([stmt])
    records = [aggregate("dev", START + timedelta(minutes=i), unit=None if i == 3 else "Cel") for i in range(6)]
    (failure,) = await sink.write_batch(items(stmt, records))
    assert failure.index == 3 and not failure.error.retriable
    assert "InvalidRequest" in str(failure.error) and "unit" in str(failure.error)
    assert len(cql.execute(f"SELECT * FROM {target}").all()) == 5


async def test_a_partition_batch_with_a_bad_row_writes_every_good_row(
    sink: ScyllaSink, cql: Session, target: str
) -> None:
    # Two partitions of 25 rows (capped at 20 a batch): the bad row's batch is refused whole by
    # the server and written again row by row; the other batches are untouched.
    cql.execute(
        f"CREATE TABLE {target} (device_id text, day date, unit text, window_start timestamp, mean double,"
        " PRIMARY KEY ((device_id, day), unit, window_start))"
    )
    stmt = statement(f"INSERT INTO {target} SELECT device_id, window_start, unit, mean FROM temperatures.aggregated")
    await sink.setup([stmt])
    records = [
        aggregate(device, START + timedelta(minutes=i), unit=None if (device, i) == ("b", 12) else "Cel")
        for i in range(25)
        for device in ("a", "b")
    ]
    (failure,) = await sink.write_batch(items(stmt, records))
    assert failure.index == 25 and not failure.error.retriable and "unit" in str(failure.error)
    assert len(cql.execute(f"SELECT * FROM {target}").all()) == 49
    assert await sink.write_batch(items(stmt, records[:25])) == []  # a replay: the same rows
    assert len(cql.execute(f"SELECT * FROM {target}").all()) == 49


async def test_a_key_longer_than_64_kib_fails_alone(sink: ScyllaSink, cql: Session, target: str) -> None:
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")
    await sink.setup([stmt])
    records = [aggregate("ok-1", START), aggregate("x" * 70_000, START), aggregate("ok-2", START)]
    (failure,) = await sink.write_batch(items(stmt, records))
    assert failure.index == 1 and not failure.error.retriable and "65535" in str(failure.error)
    assert len(cql.execute(f"SELECT * FROM {target}").all()) == 2


async def test_a_field_without_a_column_fails_the_item_naming_it(
    sink: ScyllaSink, cql: Session, target: str, settings_for: Callable[..., ConnectionSettings]
) -> None:
    cql.execute(
        f"CREATE TABLE {target} (device_id text, metric text, day date, window_start timestamp, mean double,"
        " PRIMARY KEY ((device_id, metric, day), window_start))"
    )
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated IGNORE unit")
    await sink.setup([stmt])
    (failure,) = await sink.write_batch(items(stmt, [aggregate("dev", START)]))
    assert "count, first_event_time, last_event_time, max, min, stddev, window_end: not a column" in str(failure.error)
    narrow = statement(
        f"UPSERT INTO {target} SELECT device_id, metric, window_start, mean FROM temperatures.aggregated"
    )
    other = ScyllaSink(settings_for())
    try:
        await other.setup([narrow])
        assert await other.write_batch(items(narrow, [aggregate("dev", START)])) == []
    finally:
        await other.close()
    (row,) = cql.execute(f"SELECT * FROM {target}").all()
    assert (row.device_id, row.day, row.mean) == ("dev", START.date(), 21.5)


async def test_a_missing_table_without_autocreate_fails_at_start(sink: ScyllaSink, target: str) -> None:
    with pytest.raises(SinkError, match="does not exist: create it, or add AUTOCREATE"):
        await sink.setup([statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated")])


@pytest.mark.parametrize(
    ("where", "refused"),
    [
        ("device_id = ? AND metric = ? AND day = ?", None),  # a partition
        ("device_id = ? AND metric = ? AND day = ? AND window_start = ?", None),  # a row
        ("device_id = ? AND metric = ?", "leaves out day of the partition key"),
        ("device_id = ? AND metric = ? AND day = ? AND mean = ?", "names mean, not of the primary key"),
    ],
)
async def test_a_delete_statement_is_taken_or_refused_at_start_by_its_tables_primary_key(
    settings_for: Callable[..., ConnectionSettings], target: str, where: str, refused: str | None
) -> None:
    keys = ["k"] * where.count("?")
    deleting = ScyllaSink(settings_for(delete_statement=f"DELETE FROM {target} WHERE {where}", delete_key_fields=keys))
    try:
        setup = deleting.setup([statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")])
        if refused is None:
            await setup
        else:
            with pytest.raises(SettingRefused, match=refused) as raised:
                await setup
            assert raised.value.settings == ("scylla.delete_statement",)
    finally:
        await deleting.close()


async def test_nobody_answering_at_start_is_store_unavailable(
    settings_for: Callable[..., ConnectionSettings],
) -> None:
    away = ScyllaSink(settings_for(port=free_port(), connect_timeout_s=1))
    with pytest.raises(StoreUnavailable, match="does not answer"):
        await away.setup([statement("UPSERT INTO ks.t SELECT * FROM x AUTOCREATE")])
    await away.close()  # safe twice


@pytest.mark.parametrize(
    ("key", "oversized"),
    [
        ("PRIMARY KEY ((device_id), window_start)", "device_id"),  # one partition key column: the server's check
        ("PRIMARY KEY ((device_id, day), unit, window_start)", "unit"),  # a clustering column
    ],
)
async def test_a_key_column_over_64_kib_in_a_user_table_fails_alone(
    sink: ScyllaSink, cql: Session, target: str, key: str, oversized: str
) -> None:
    """Issue 35, Cassandra's side: a key value over 65,535 bytes is refused per statement, so
    only that item fails, for good, with the server's reason; the batch around it is written."""
    cql.execute(
        f"CREATE TABLE {target} (device_id text, day date, unit text, window_start timestamp, mean double, {key})"
    )
    stmt = statement(f"INSERT INTO {target} SELECT device_id, window_start, unit, mean FROM temperatures.aggregated")
    await sink.setup([stmt])
    records = [aggregate(f"dev-{i}", START + timedelta(minutes=i), unit="Cel") for i in range(40)]
    records[13][oversized] = "温" * 23_334  # 70,002 bytes of UTF-8
    (failure,) = await sink.write_batch(items(stmt, records))
    assert failure.index == 13 and not failure.error.retriable
    assert "InvalidRequest" in str(failure.error) and "65535" in str(failure.error)
    assert len(cql.execute(f"SELECT * FROM {target}").all()) == 39


async def test_the_longest_device_id_in_a_multibyte_script_is_written(
    sink: ScyllaSink, cql: Session, target: str
) -> None:
    stmt = statement(f"UPSERT INTO {target} SELECT * FROM temperatures.aggregated AUTOCREATE")
    await sink.setup([stmt])
    assert await sink.write_batch(items(stmt, [aggregate("温" * 256, START), aggregate("dev", START)])) == []
    assert {row.device_id for row in cql.execute(f"SELECT device_id FROM {target}")} == {"温" * 256, "dev"}
