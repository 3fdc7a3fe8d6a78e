"""Decision 0011 on the job (its real ``foreachBatch`` on Spark): a fleet in which devices run
hours ahead and hours behind. Every batch decides as the reference model does, and every
other device's windows are exact: as if the wrong clocks were not there, each window of a
device holding all of its readings, and none of them late."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from device_fleet import DELAY, HOUR, SIZE, T0, batches, fleet, others, outcome
from routing_harness import SparkRouter, same
from routing_model import DeviceClockModel, Outputs, Reading, stats

from fluxgate_aggregator.settings import AggregatorSettings, WindowSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DEVICES, SECONDS = 50, 45
SKEWED = {"d007": HOUR, "d031": -3 * HOUR}  # one device an hour ahead, one three hours behind
SILENT = {"d003": 12}  # silent from 12 s on: its last windows close with the fleet's time
# The gateways' clock ends at 44 s: each device's watermark at 39 s has closed three windows.
STARTS = (0, SIZE, 2 * SIZE)


def job(spark: Any, folder: Path) -> SparkRouter:
    window = WindowSettings(size="10 seconds", watermark="5 seconds", dedup_horizon="10 seconds")
    settings = AggregatorSettings(window=window, late_topic="late", deadletter_topic="dlq", output_topic="out")
    return SparkRouter(spark, settings, folder)


def run_both(spark: Any, folder: Path, readings: list[Reading]) -> list[Outputs]:
    model, router = DeviceClockModel(size_ms=SIZE, slide_ms=SIZE, delay_ms=DELAY), job(spark, folder)
    outputs = []
    for batch_id, batch in enumerate(batches(readings)):
        expected, got = model.batch(batch), router.batch(batch_id, batch)
        assert same(expected, got) == [], f"batch {batch_id}"
        outputs.append(got)
    return outputs


def test_devices_hours_ahead_and_behind_or_silent_change_nothing_for_the_others(spark: Any, tmp_path: Path) -> None:
    """The wrong clocks and a device gone silent, in one fleet (one job: the Spark batches are
    the cost). The silent device's windows close with the fleet's time, not its own."""
    readings = fleet(DEVICES, SECONDS, skews=SKEWED, silent_after=SILENT)
    outputs = run_both(spark, tmp_path / "fleet", readings)
    kept = others(DEVICES, [*SKEWED, *SILENT])
    aggregates, late = outcome(outputs, kept)
    assert late == []
    # Exact: each closed window of each other device holds every one of its ten readings.
    exact = {}
    for device in kept:
        for start in STARTS:
            members = [r for r in readings if r.device_id == device and start <= r.event_ms - T0 < start + SIZE]
            exact[(device, T0 + start, T0 + start + SIZE)] = stats(members)
    assert aggregates.keys() == exact.keys()
    assert all(aggregates[key].close_to(exact[key]) for key in exact)  # type: ignore[attr-defined]
    # The wrong clocks get their windows on their own clocks, none of their readings late.
    theirs, their_late = outcome(outputs, set(SKEWED))
    on_their_clocks = sorted(skew + start for skew in SKEWED.values() for start in STARTS)
    assert their_late == [] and sorted(start - T0 for _, start, _ in theirs) == on_their_clocks
    # The silent device's windows: ten readings in [0, 10 s), two in [10 s, 20 s).
    silent, _ = outcome(outputs, set(SILENT))
    assert sorted((start - T0, value.count) for (_, start, _), value in silent.items()) == [(0, 10), (10_000, 2)]


def test_a_device_back_after_a_day_is_judged_like_the_others(spark: Any, tmp_path: Path) -> None:
    """The fleet quiet for a day (the gateways' clock jumps), then back; one device returns 10 s
    after the rest. Every batch decides as the model does, nothing of the returning device is
    late, and its windows since it came back close as everyone's do."""
    day = 24 * HOUR
    later = [
        Reading(r.device_id, r.event_ms + day, r.value, ingest_ms=r.received_ms + day)
        for r in fleet(10, 30)
        if r.device_id != "d005" or r.event_ms >= T0 + SIZE
    ]
    outputs = run_both(spark, tmp_path / "back", fleet(10, 20) + later)
    aggregates, late = outcome(outputs, {"d005"})
    assert late == []
    returned = sorted(
        (start - T0 - day, value.count) for (_, start, _), value in aggregates.items() if start >= T0 + day
    )
    assert returned == [
        (SIZE, 10)
    ]  # [10 s, 20 s): closed by its own watermark, as the fleet's [0, 10 s) and [10 s, 20 s)
    fleet_windows = sorted(start - T0 - day for (_, start, _) in outcome(outputs, {"d001"})[0] if start >= T0 + day)
    assert fleet_windows == [0, SIZE]
