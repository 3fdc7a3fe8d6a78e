"""The device-table benchmark's arithmetic (bench/device_table.py, issue #36): every device
filled once, the medians per phase and per batch, and what a million devices add to a batch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/ holds scripts, not a package: its modules import each other by bare name.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from device_table import PHASES, LedgerRun, Point, fill_chunks, parse_args, per_million


def batch(seconds: float) -> dict[str, float]:
    """A batch whose phases share ``seconds`` equally."""
    return dict.fromkeys(PHASES, seconds / len(PHASES))


def test_the_fill_sends_for_every_device_once_in_chunks() -> None:
    chunks = fill_chunks(450_000, 200_000)
    assert [len(chunk) for chunk in chunks] == [200_000, 200_000, 50_000]
    assert sorted(d for chunk in chunks for d in chunk) == list(range(450_000))
    assert fill_chunks(0, 200_000) == []


def test_a_point_reports_each_phases_median_the_median_batch_and_the_mean() -> None:
    point = Point(10_000, [batch(2.0), batch(3.0), batch(10.0)])
    medians = point.medians()
    assert medians["batch"] == pytest.approx(3.0)
    assert medians["mean"] == pytest.approx(5.0), "an eviction's batch counts in the mean"
    assert set(medians) == {*PHASES, "batch", "mean"}
    assert medians["learn"] == pytest.approx(3.0 / len(PHASES))


def test_a_million_more_devices_add_the_slope_of_the_mean_batch() -> None:
    # 3 s at 10,000 devices, 3 s more per million: 6 s at 1,010,000.
    points = [Point(10_000, [batch(3.0)]), Point(1_010_000, [batch(6.0)]), Point(510_000, [batch(4.5)])]
    assert per_million(points) == pytest.approx(3.0)
    assert per_million(points[:1]) is None, "one size says nothing of the slope"


def test_the_defaults_measure_hive_sized_fleets_in_small_batches() -> None:
    args = parse_args([])
    assert [int(n) for n in args.devices.split(",")] == [10_000, 100_000, 300_000, 1_000_000]
    assert args.batch == 400 and args.skip < args.skip + args.batches


def test_the_eviction_threshold_is_the_ledgers_unless_asked(tmp_path: Path) -> None:
    assert parse_args([]).evict_at_least is None
    assert parse_args(["--evict-at-least", "50000"]).evict_at_least == 50_000
    default = LedgerRun(object(), str(tmp_path / "a"), 30_000, 60_000).ledger  # type: ignore[arg-type]
    asked = LedgerRun(object(), str(tmp_path / "b"), 30_000, 60_000, 50_000).ledger  # type: ignore[arg-type]
    assert asked.evict_at_least == 50_000 != default.evict_at_least
