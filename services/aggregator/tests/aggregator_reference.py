"""A pure-Python reference of the aggregation, to check Spark's output against in tests
and benchmarks (never imported by the job)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from fluxgate_aggregator.consumed import IDENTITY
from fluxgate_core.consumed_record import ConsumedRecord


def reading(device: str, at_ms: int, value: float, metric: str = "temperature", unit: str = "Cel") -> dict[str, Any]:
    """A SensorReading as a gateway would produce it, at event time ``at_ms``."""
    return {
        "device_id": device,
        "metric": metric,
        "value": value,
        "unit": unit,
        "event_time": at_ms,
        "ingest_time": at_ms + 50,
        "source_protocol": "MQTT",
        "source": f"devices/{device}/{metric}",
        "sequence": None,
        "attributes": {},
    }


def distinct_readings(readings: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first copy of every reading, in order: a redelivered or resent copy counts once."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for record in readings:
        identity = tuple(record.get(name) for name in IDENTITY)
        if identity not in seen:
            seen.add(identity)
            out.append(record)
    return out


def window_starts(event_ms: int, size_ms: int, slide_ms: int) -> list[int]:
    """Start of every window ``[start, start + size)`` holding ``event_ms``, latest first."""
    start = (event_ms // slide_ms) * slide_ms
    starts = []
    while start + size_ms > event_ms:
        starts.append(start)
        start -= slide_ms
    return starts


def expected_aggregates(
    readings: Iterable[dict[str, Any]], size_ms: int, slide_ms: int, metric: str = "temperature"
) -> dict[tuple[str, int], dict[str, Any]]:
    """Every window of every device, as ``TemperatureAggregate`` dicts with times in epoch ms;
    each reading counted once, however many copies of it there are."""
    members: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for record in distinct_readings(readings):
        if record["metric"] == metric:
            for start in window_starts(record["event_time"], size_ms, slide_ms):
                members[(record["device_id"], start)].append(record)
    return {key: _aggregate(key, rows, size_ms, metric) for key, rows in members.items()}


def _aggregate(key: tuple[str, int], rows: list[dict[str, Any]], size_ms: int, metric: str) -> dict[str, Any]:
    device, start = key
    values = [row["value"] for row in rows]
    times = [row["event_time"] for row in rows]
    return {
        "device_id": device,
        "metric": metric,
        "window_start": start,
        "window_end": start + size_ms,
        "count": len(rows),
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / len(values),
        "stddev": statistics.pstdev(values),
        "first_event_time": min(times),
        "last_event_time": max(times),
        "unit": max(row["unit"] for row in rows),
    }


def as_millis(record: dict[str, Any]) -> dict[str, Any]:
    """fastavro decodes timestamp-millis to datetimes; the reference works in epoch ms."""
    return {
        key: int(value.timestamp() * 1000) if isinstance(value, datetime) else value for key, value in record.items()
    }


def assert_aggregate_equal(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Every field equal; the standard deviation to 1e-12 relative, because Spark's
    streaming variance and Python's two-pass one round differently in the last bits."""
    got = as_millis(got)
    assert set(got) == set(want), f"fields differ: {set(got) ^ set(want)}"
    for name, value in want.items():
        if name == "stddev":
            assert math.isclose(got[name], value, rel_tol=1e-12, abs_tol=1e-12), (name, got, want)
        else:
            assert got[name] == value, f"{name}: got {got[name]!r}, want {value!r} in {got}"


def by_window(records: Iterable[ConsumedRecord]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Decoded aggregates grouped by (device, window start in ms); checks each is keyed by device."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for item in records:
        assert item.record is not None, "decode the aggregates"
        assert item.key == item.record["device_id"].encode(), "aggregates are keyed by device id"
        out[(item.record["device_id"], as_millis(item.record)["window_start"])].append(item.record)
    return out
