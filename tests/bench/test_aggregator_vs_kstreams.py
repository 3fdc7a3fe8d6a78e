"""The aggregator benchmark's comparison with its Kafka Streams peer: the order the legs take
turns in, the ratios job/kstreams, the check that both closed the same windows, and the
close → output latency (the figures the report stands on)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

# Appended, not first: bench/ has an elasticsearch.py, which must never shadow the library for
# the tests that share this worker's interpreter (test_schema_evolution failed to import once).
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from aggregator import (
    Leg,
    batch_cost,
    batch_figures,
    floor_over_kstreams,
    job_over_kstreams,
    latency_ratio,
    latency_span_problem,
    leg_names,
    reading_cost_over_kstreams,
    seconds,
    sweep_batch,
)
from kstreams.latency import Paced, latencies
from kstreams.peer import PeerLeg, Progress, compare_windows, steady_span, windows_of

from fluxgate_aggregator.settings import SparkSettings


def leg(name: str, cpu_s: float, rows: int, per_second: float, peak_mib: float, jit_s: float = 0.0) -> PeerLeg:
    return PeerLeg(name, "", rows, rows, rows / per_second, cpu_s, 0.0, 0.0, peak_mib, 0, "", jit_s)


def test_job_and_kstreams_take_turns_after_the_other_legs() -> None:
    assert leg_names(["rate", "job", "kstreams"], 1) == ["rate", "job", "kstreams"]
    assert leg_names(["job", "kafka", "kstreams"], 2) == ["kafka", "job-1", "kstreams-1", "job-2", "kstreams-2"]


def test_the_sweep_runs_the_job_twice_per_batch_size_after_the_turns_in_batches_of_that_size() -> None:
    names = leg_names(["job", "kstreams"], 2, [50_000, 500_000])
    sweep = ["sweep-50000-1", "sweep-50000-2", "sweep-500000-1", "sweep-500000-2"]
    assert names == ["job-1", "kstreams-1", "job-2", "kstreams-2", *sweep]
    assert leg_names(["kstreams"], 1, [50_000]) == ["kstreams"], "no job, no sweep"
    spark = SparkSettings(max_offsets_per_trigger=100_000)
    assert sweep_batch("sweep-50000-2", spark).max_offsets_per_trigger == 50_000
    assert sweep_batch("job-2", spark) is spark


def job_leg(name: str, batches: list[int], cpu_s: float, jit_s: float = 0.0) -> Leg:
    """A job leg whose first batch (not steady) holds as much as its second."""
    progress = [SimpleNamespace(numInputRows=rows) for rows in [batches[0], *batches]]
    return Leg(name, "", progress, wall=1.0, steady_cpu=cpu_s, steady_jit=jit_s)


def test_the_job_cpu_splits_into_a_cost_per_batch_and_per_reading_over_its_warm_legs() -> None:
    # 1.8 CPU-s a batch and 15 µs a reading, net of JIT; the first leg at each size (making
    # that size's code) costs more.
    def cpu(rows: int, batches: int) -> float:
        return batches * (1.8 + 15e-6 * rows)

    legs = [
        job_leg("job-1", [100_000] * 9, cpu_s=3 * cpu(100_000, 9)),
        leg("kstreams-1", cpu_s=20.0, rows=1_000_000, per_second=50_000, peak_mib=500, jit_s=5.0),  # 15 µs net
        job_leg("job-2", [100_000] * 9, cpu_s=cpu(100_000, 9) + 4.0, jit_s=4.0),
        job_leg("sweep-50000-1", [50_000] * 19, cpu_s=2 * cpu(50_000, 19)),
        job_leg("sweep-50000-2", [50_000] * 19, cpu_s=cpu(50_000, 19)),
        job_leg("sweep-500000-1", [500_000], cpu_s=2 * cpu(500_000, 1)),
        job_leg("sweep-500000-2", [500_000], cpu_s=cpu(500_000, 1)),
    ]
    cost = batch_cost(legs)  # type: ignore[arg-type]
    assert cost["cpu_s_per_batch"] == pytest.approx(1.8, abs=1e-3)
    assert cost["cpu_us_per_reading"] == pytest.approx(15.0, abs=1e-2)
    assert [rows for rows, _ in cost["points"]] == [100_000, 50_000, 500_000], "each size's first leg left out"
    ratio = reading_cost_over_kstreams(cost, legs)  # type: ignore[arg-type]
    assert ratio == {"job_reading_cost_over_kstreams_net_of_jit": pytest.approx(1.0, abs=1e-3)}


def test_one_batch_size_splits_nothing() -> None:
    legs = [job_leg("job-1", [100_000] * 9, 30.0), job_leg("job-2", [100_000] * 9, 30.0)]
    assert batch_cost(legs) == {}  # type: ignore[arg-type]
    legs.append(job_leg("sweep-50000-1", [50_000] * 19, 40.0))
    assert batch_cost(legs) == {}, "a size's first leg alone is no point"  # type: ignore[arg-type]
    assert reading_cost_over_kstreams({}, legs) == {}  # type: ignore[arg-type]


def test_ratios_are_of_each_sides_median_over_its_rounds() -> None:
    legs = [
        leg("job-1", cpu_s=40.0, rows=1_000_000, per_second=40_000, peak_mib=1500),  # 40 µs/reading
        leg("kstreams-1", cpu_s=20.0, rows=1_000_000, per_second=80_000, peak_mib=500),  # 20 µs
        leg("job-2", cpu_s=44.0, rows=1_000_000, per_second=36_000, peak_mib=1300),  # 44 µs
        leg("kstreams-2", cpu_s=22.0, rows=1_000_000, per_second=70_000, peak_mib=700),  # 22 µs
        leg("job-3", cpu_s=42.0, rows=1_000_000, per_second=38_000, peak_mib=1400),  # 42 µs: the median
    ]
    ratios = job_over_kstreams(legs)  # type: ignore[arg-type]
    assert ratios["job_over_kstreams_cpu_per_reading"] == pytest.approx(42 / 21, abs=1e-3)
    assert ratios["job_over_kstreams_peak_memory"] == pytest.approx(1400 / 600, abs=1e-3)
    assert ratios["job_over_kstreams_readings_per_second"] == pytest.approx(38_000 / 75_000, abs=1e-3)


def test_cpu_net_of_each_jvms_jit_is_a_ratio_of_its_own() -> None:
    legs = [
        leg("job-1", cpu_s=40.0, rows=1_000_000, per_second=40_000, peak_mib=1500, jit_s=10.0),  # 30 µs net
        leg("kstreams-1", cpu_s=20.0, rows=1_000_000, per_second=80_000, peak_mib=500, jit_s=1.0),  # 19 µs net
    ]
    ratios = job_over_kstreams(legs)  # type: ignore[arg-type]
    assert ratios["job_over_kstreams_cpu_per_reading"] == pytest.approx(2.0, abs=1e-3)
    assert ratios["job_over_kstreams_cpu_per_reading_net_of_jit"] == pytest.approx(30 / 19, abs=1e-3)


def test_no_ratio_without_both_sides() -> None:
    assert job_over_kstreams([leg("job", 1.0, 10, 10.0, 1.0)]) == {}  # type: ignore[list-item]


def test_the_floor_is_spark_reading_and_decoding_and_an_idle_session_against_the_peers_median() -> None:
    legs = [
        leg("floor", cpu_s=25.0, rows=1_000_000, per_second=90_000, peak_mib=900),  # 25 µs a reading
        leg("kstreams-1", cpu_s=20.0, rows=1_000_000, per_second=80_000, peak_mib=500),
        leg("kstreams-2", cpu_s=22.0, rows=1_000_000, per_second=70_000, peak_mib=700),
    ]
    ratios = floor_over_kstreams(legs, idle_mib=660.0)  # type: ignore[arg-type]
    assert ratios == {
        "floor_over_kstreams_cpu_per_reading": pytest.approx(25 / 21, abs=1e-3),
        "idle_session_over_kstreams_peak_memory": pytest.approx(660 / 600, abs=1e-3),
    }
    # Without the floor leg, the idle session alone; without the peer, nothing to compare with.
    assert list(floor_over_kstreams(legs[1:], 660.0)) == ["idle_session_over_kstreams_peak_memory"]  # type: ignore[arg-type]
    assert floor_over_kstreams(legs[:1], 660.0) == {}  # type: ignore[arg-type]


def aggregate(device: str, start_ms: int, count: int, mean: float) -> dict[str, object]:
    return {"device_id": device, "window_start": start_ms, "count": count, "min": 15.0, "max": 34.9,
            "mean": mean, "stddev": 5.77}  # fmt: skip


def test_the_same_windows_with_means_equal_up_to_summation_order_are_equal() -> None:
    ours = windows_of([aggregate("d0", 0, 250, 24.95), aggregate("d1", 0, 250, 24.9)])
    theirs = windows_of([aggregate("d0", 0, 250, 24.95 + 1e-12), aggregate("d1", 0, 250, 24.9)])
    assert compare_windows(ours, theirs)["equal"] is True


def test_a_missing_window_or_another_count_is_not_equal() -> None:
    ours = windows_of([aggregate("d0", 0, 250, 24.95), aggregate("d1", 0, 250, 24.9)])
    missing = compare_windows(ours, windows_of([aggregate("d0", 0, 250, 24.95)]))
    assert (missing["equal"], missing["only_job"]) == (False, 1)
    counted = compare_windows(ours, windows_of([aggregate("d0", 0, 251, 24.95), aggregate("d1", 0, 250, 24.9)]))
    assert (counted["equal"], counted["differing"], counted["first_differing"]) == (False, 1, [["d0", 0]])


def test_nothing_on_either_side_is_not_a_pass() -> None:
    assert compare_windows({}, {})["equal"] is False


def test_the_steady_span_leaves_out_the_first_records() -> None:
    lines = [Progress(10.0, 0, 0, 0, 0), Progress(11.0, 50, 50, 0, 0), Progress(12.0, 120, 120, 0, 0),
             Progress(14.0, 300, 300, 0, 3)]  # fmt: skip
    assert steady_span(lines, skip=100, total=300) == (12.0, 14.0, 180)


def test_latency_counts_the_windows_that_closed_while_readings_flowed_after_settling() -> None:
    paced = Paced(start=1000.0, end=1200.0, sent=2_000_000)
    arrivals = {
        ("d0", 960_000): 1050.2,  # closes at 1050 s (60 s window + 30 s grace): 0.2 s
        ("d1", 960_000): 1051.0,  # 1 s
        ("d0", 900_000): 990.0,  # closed at 990 s, before the readings began
        ("d0", 1_020_000): 1111.0,  # closes at 1110 s: 1 s
        ("d1", 1_020_000): 1110.5,  # 0.5 s
        ("d0", 1_080_000): 1172.0,  # closes at 1170 s: 2 s
        ("d1", 1_080_000): 1170.1,  # 0.1 s
        ("d0", 1_140_000): 1240.0,  # closes at 1230 s, after they stopped
    }
    figures = latencies(arrivals, paced, 60_000, 30_000, settle_s=20.0, devices=2)
    assert (figures["windows"], figures["expected"], figures["missing"]) == (6, 6, 0)
    assert figures["p50_s"] == pytest.approx(1.0)
    assert figures["max_s"] == pytest.approx(2.0)
    # Per close, oldest first: the lag of each, to tell an engine falling behind from one late once.
    assert [(row["before_end_s"], row["arrived"]) for row in figures["by_close"]] == [(150, 2), (90, 2), (30, 2)]
    assert [row["p50_s"] for row in figures["by_close"]] == pytest.approx([1.0, 1.0, 2.0])


def test_a_window_that_never_arrived_is_infinitely_late() -> None:
    paced = Paced(start=1000.0, end=1200.0, sent=2_000_000)
    arrivals = {("d0", 960_000): 1050.2, ("d0", 1_020_000): 1111.0, ("d0", 1_080_000): 1171.0}  # none of d1's
    figures = latencies(arrivals, paced, 60_000, 30_000, settle_s=20.0, devices=2)
    assert (figures["windows"], figures["missing"]) == (3, 3)
    assert figures["p50_s"] is None and figures["p99_s"] is None


def test_windows_within_the_settling_time_do_not_count() -> None:
    paced = Paced(start=1000.0, end=1100.0, sent=1_000_000)
    # closes at 1010 s, within the first 20 s; the next close (1070 s) is counted and missing
    figures = latencies({("d0", 920_000): 1010.1}, paced, 60_000, 30_000, settle_s=20.0, devices=1)
    assert (figures["windows"], figures["expected"], figures["missing"]) == (0, 1, 1)


def test_a_window_that_ended_before_the_readings_began_is_not_expected() -> None:
    # The window ending at 960 s closes at 990 s, 22.3 s into the span, but holds no reading:
    # counting it made an engine miss every one of its windows (a peer leg's p99 was None).
    paced = Paced(start=967.7, end=1200.0, sent=2_000_000)
    figures = latencies({("d0", 960_000): 1050.1}, paced, 60_000, 30_000, settle_s=20.0, devices=1)
    assert [row["before_end_s"] for row in figures["by_close"]] == [150, 90, 30]
    assert (figures["windows"], figures["expected"], figures["missing"]) == (1, 3, 2)


def test_the_latency_ratio_needs_every_window_on_both_sides() -> None:
    both = {"job": {"p99_s": 12.6}, "kstreams": {"p99_s": 0.13}}
    assert latency_ratio(both) == {"job_over_kstreams_latency_p99": 96.9}
    assert latency_ratio({"job": {"p99_s": None}, "kstreams": {"p99_s": 0.13}}) == {}
    assert latency_ratio({}) == {}


def test_durations_in_seconds() -> None:
    assert (seconds("30 seconds"), seconds("1 minute"), seconds("5 seconds")) == (30, 60, 5)


def test_a_paced_span_too_short_to_hold_a_window_close_is_refused() -> None:
    # 20 s settling + a 1-minute window + 30 s grace: a 60 s span may catch no close at all.
    problem = latency_span_problem(60, 20)
    assert problem is not None and "110 s" in problem
    assert latency_span_problem(110, 20) is None
    assert latency_span_problem(0, 20) is None  # 0: no paced leg


def test_the_job_batches_of_a_paced_leg_say_whether_it_kept_up() -> None:
    progress = [SimpleNamespace(numInputRows=rows, durationMs={"triggerExecution": ms})
                for rows, ms in [(100, 4000), (25_000, 9000), (30_000, 12_000)]]  # fmt: skip
    assert batch_figures(progress) == {"batches": 3, "read": 55_100, "batch_p50_s": 9.0, "batch_max_s": 12.0}
    assert batch_figures([]) == {}  # the peer's leg has no Spark batches
