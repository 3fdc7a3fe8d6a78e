"""The per-trigger cost benchmark's arithmetic (issue #40): the fit of batch duration against
its size, the steady batch back to back, close → output from it, the phase times between two
readings of a Summary and which batches count as steady (the figures the report stands on)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Appended, not first: bench/ has an elasticsearch.py, which must never shadow the library.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from kstreams.latency import Paced
from trigger_cost import (
    Batch,
    Leg,
    close_to_output,
    delay_figures,
    fit_line,
    phase_deltas,
    plan,
    steady_batch_seconds,
    steady_batches,
)


def test_the_fit_finds_the_fixed_cost_and_the_cost_per_reading() -> None:
    # 0.8 s whatever the size, plus 20 µs a reading.
    line = fit_line([(rows, 0.8 + 20e-6 * rows) for rows in (10, 1_000, 5_000, 20_000)])
    assert line.intercept == pytest.approx(0.8)
    assert line.slope == pytest.approx(20e-6)


def test_batches_of_one_size_fit_a_flat_line_through_their_mean() -> None:
    line = fit_line([(100, 1.0), (100, 2.0)])
    assert line.intercept == pytest.approx(1.5)
    assert line.slope == 0.0
    with pytest.raises(ValueError):
        fit_line([])


def test_back_to_back_a_batch_grows_with_what_came_during_the_last_one() -> None:
    # Half of every second goes to readings at 10,000/s (50 µs each): the fixed cost doubles.
    assert steady_batch_seconds(0.8, 50e-6, 10_000) == pytest.approx(1.6)
    assert steady_batch_seconds(0.8, 0.0, 10_000) == pytest.approx(0.8)
    # A reading costing its whole share or more: the job falls behind without bound.
    assert steady_batch_seconds(0.8, 100e-6, 10_000) is None
    assert steady_batch_seconds(0.8, 150e-6, 10_000) is None


def test_a_close_waits_for_the_running_batch_then_a_whole_one() -> None:
    assert close_to_output(1.0, 0.5) == pytest.approx(1.5)
    assert close_to_output(1.0, 0.99) == pytest.approx(1.99)
    # The 2 s goal at p99 allows batches of at most about 1 s.
    assert close_to_output(1.01, 0.99) > 2.0 > close_to_output(1.0, 0.99)


def test_phase_times_are_what_happened_between_two_readings() -> None:
    before = {"read": (10.0, 20.0), "late": (0.0, 0.0)}
    after = {"read": (13.0, 26.0), "late": (0.0, 0.0), "write": (0.4, 2.0)}
    deltas = phase_deltas(before, after)
    assert deltas["read"] == {"seconds": 3.0, "calls": 6, "mean_ms": 500.0}
    assert deltas["late"] == {"seconds": 0.0, "calls": 0, "mean_ms": 0.0}
    assert deltas["write"] == {"seconds": 0.4, "calls": 2, "mean_ms": 200.0}


def batch(batch_id: int, started: float, rows: int, seconds: float) -> Batch:
    return Batch(batch_id, started, rows, seconds, seconds * 0.9)


def test_steady_batches_have_input_and_come_after_the_first_ones() -> None:
    batches = [
        batch(0, 100.0, 50, 5.0),  # the first: code generation, connections
        batch(1, 108.0, 0, 0.1),  # no input
        batch(2, 109.0, 20, 1.0),
        batch(3, 110.5, 20, 1.0),
        batch(4, 139.5, 20, 1.0),  # after the readings stopped: its size is what it is
    ]
    assert [b.batch_id for b in steady_batches(batches, 1)] == [2, 3, 4]
    assert [b.batch_id for b in steady_batches(batches, 0)] == [0, 2, 3, 4]


def test_a_leg_summarises_its_steady_batches() -> None:
    batches = [batch(0, 100.0, 40, 4.0), *[batch(i, 104.0 + i, 20 * i, 1.0 * i) for i in range(1, 4)]]
    batches = [Batch(b.batch_id, b.started, b.rows, b.trigger_s, b.add_batch_s, jobs=4 + b.batch_id % 2)
               for b in batches]  # fmt: skip
    leg = Leg("job", 20.0, Paced(100.0, 140.0, 800), batches, query_jobs=18, cpu_s=8.0, skip=1)
    summary = leg.summary()
    assert summary["steady_batches"] == 3
    assert summary["median_trigger_s"] == 2.0
    assert summary["median_rows"] == 40
    assert summary["jobs_per_batch_median"] == 5
    assert summary["query_jobs_per_batch"] == 4.5
    assert summary["cpu_us_per_reading"] == 10_000.0
    assert summary["cpu_cores"] == 0.2
    assert (summary["read"], summary["unread_at_stop"]) == (160, 640)
    assert summary["cpu_s_per_batch"] == 2.0  # 8 CPU-s over the 4 batches inside the paced span


def test_a_batch_half_outside_the_paced_span_counts_half() -> None:
    batches = [batch(0, 98.0, 10, 4.0), batch(1, 102.0, 10, 4.0), batch(2, 138.0, 10, 4.0)]
    leg = Leg("count", 20.0, Paced(100.0, 140.0, 800), batches, query_jobs=6, cpu_s=4.0)
    assert leg.batches_in_pace == pytest.approx(2.0)
    assert leg.summary()["cpu_s_per_batch"] == 2.0


def test_the_job_runs_every_rate_before_the_comparators() -> None:
    class Args:
        rates = "20,10000"
        comparator_rates = "20"
        comparators = ["count", "aggregate"]

    assert plan(Args()) == [("job", 20.0), ("job", 10_000.0), ("count", 20.0), ("aggregate", 20.0)]  # type: ignore[arg-type]


def test_real_time_delays_are_nearest_rank_percentiles_of_what_arrived() -> None:
    # Sent at 1000 + i, each 0.01 .. 1.00 s on its way, unsorted; the first 10 s sent left out.
    arrivals = [(1000.0 + i, 1000.0 + i + 0.01 * (110 - i)) for i in range(110)]
    figures = delay_figures(arrivals, after=1010.0)
    assert figures == {"records": 100, "p50_s": pytest.approx(0.51), "p99_s": pytest.approx(1.0), "max_s": 1.0}
    assert delay_figures(arrivals, after=2000.0) == {"records": 0, "p50_s": None, "p99_s": None, "max_s": None}
