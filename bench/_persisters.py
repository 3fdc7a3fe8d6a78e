"""What the persister benchmarks share: the aggregates they write and the persister's own counts."""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

START = datetime(2024, 5, 1, 22, 0, tzinfo=UTC)  # windows over two days: two daily indices, two partitions


def aggregates(count: int, devices: int) -> list[dict[str, Any]]:
    """``count`` TemperatureAggregates, ``devices`` per window minute."""
    out = []
    for i in range(count):
        start = START + timedelta(minutes=i // devices)
        out.append(
            {
                "device_id": f"d{i % devices}",
                "metric": "temperature",
                "window_start": start,
                "window_end": start + timedelta(minutes=1),
                "count": 60,
                "min": 15.0 + (i % 200) / 10,
                "max": 25.0 + (i % 200) / 10,
                "mean": 20.0 + (i % 200) / 10,
                "stddev": 1.5,
                "first_event_time": start,
                "last_event_time": start + timedelta(seconds=59),
                "unit": "Cel",
            }
        )
    return out


def metric(port: int, name: str, missing: float = 0.0) -> float:
    """The sum of metric ``name``'s samples in the persister on ``port``; ``missing`` before it
    answers or shows the metric. Read every 100-200 ms at most: each read renders every metric."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return missing
    samples = [line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#")]
    found = [float(value) for key, value in samples if key.split("{")[0] == name]
    return sum(found) if found else missing


def written(port: int) -> float:
    """Records the persister's store confirmed so far."""
    return metric(port, "fluxgate_sink_records_written_total")
