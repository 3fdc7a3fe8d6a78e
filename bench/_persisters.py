"""What the persister benchmarks share: the aggregates they write and the persister's own counts."""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from _common import ROOT, LegResult, micros_per, print_table, write_report

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


def leg(name: str, result: dict[str, Any], count: int, cpu_key: str) -> LegResult:
    """One leg's result dict (``records_per_s``, ``wall_s`` and the CPU seconds under ``cpu_key``) for the report."""
    extra = {key: value for key, value in result.items() if isinstance(value, int | float) and key != "records_per_s"}
    return LegResult("", name, result["records_per_s"], micros_per(result[cpu_key], count), extra)


def report(name: str, title: str, legs: list[LegResult], ratios: dict[str, float], settings: dict[str, Any]) -> None:
    """The table on stdout, and ``bench-results/<name>.{json,md,png}``."""
    print_table(
        title,
        ["leg", "records/s", "CPU µs/record"],
        [[item.name, item.per_second, item.cpu_us] for item in legs],
    )
    for key, value in ratios.items():
        print(f"{key}: {value:.3f}")
    paths = write_report(name, title, "record", legs, ratios, settings)
    print("results: " + ", ".join(str(path.relative_to(ROOT)) for path in paths))
