"""The transformWithState probe's routing (bench/tws_probe.py), without Spark: lateness against
the device's watermark at the batch's start, copies, windows folded and closed, identities
remembered within the horizon and stored in per-minute blobs."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest

# bench/ holds scripts, not a package: its modules import each other by bare name.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from tws_probe import (
    BUCKET_MS,
    DeviceState,
    Memory,
    Reading,
    Routed,
    Rules,
    WindowStats,
    bucket_of,
    is_late,
    is_remembered,
    pack,
    ratios_of,
    route_device,
    unpack,
    window_start,
)

RULES = Rules()  # 1-minute windows, 30 s watermark, 2-minute dedup horizon: 120 s kept
T0 = 28_333_333 * 60_000  # minute-aligned


class Store:
    """The ``counted`` map state: blobs by bucket."""

    def __init__(self) -> None:
        self.blobs: dict[int, bytes] = {}

    def memory(self, late: bytes = b"", oldest: int | None = None) -> Memory:
        return Memory(self.blobs.get, late, oldest)

    def save(self, memory: Memory, mark_ms: int) -> tuple[bytes, int | None]:
        writes, gone = memory.forget(mark_ms, RULES.horizon_ms)
        for bucket in gone:
            self.blobs.pop(bucket, None)
        self.blobs.update(writes)
        return pack(memory.late.items()), memory.oldest_ms


def r(seconds: float, value: float = 20.0, sequence: int | None = None) -> Reading:
    return Reading(T0 + int(seconds * 1000), value, sequence, "Cel")


def batch(
    state: DeviceState, store: Store, readings: list[Reading], late: bytes = b"", oldest: int | None = None
) -> tuple[Routed, bytes, int | None]:
    memory = store.memory(late, oldest)
    routed = route_device(state, memory, readings, RULES)
    assert state.mark_ms is not None
    late_blob, oldest = store.save(memory, state.mark_ms)
    return routed, late_blob, oldest


def test_welford_folding_matches_two_pass_statistics() -> None:
    values = [15.0, 21.5, 19.25, 30.0, 15.0, 17.75]
    stats = WindowStats.of(T0 + 5, values[0], "Cel")
    for i, value in enumerate(values[1:], start=1):
        stats.fold(T0 + 5 - i, value, None)
    assert (stats.count, stats.min, stats.max) == (6, 15.0, 30.0)
    assert math.isclose(stats.mean, statistics.fmean(values), rel_tol=1e-12)
    assert math.isclose(stats.stddev, statistics.pstdev(values), rel_tol=1e-12)
    assert (stats.first_ms, stats.last_ms, stats.unit) == (T0, T0 + 5, "Cel")


def test_the_unit_is_the_greatest_one_stated_whatever_the_order() -> None:
    stats = WindowStats.of(T0, 1.0, None)
    for unit in ("Cel", None, "K", "F"):
        stats.fold(T0, 1.0, unit)
    assert stats.unit == "K"


def test_lateness_is_at_or_behind_the_watermark_and_nothing_is_late_without_one() -> None:
    assert is_late(T0, T0) and is_late(T0 - 1, T0) and not is_late(T0 + 1, T0)
    assert not is_late(0, None)
    assert window_start(T0 + 59_999, 60_000) == T0 and window_start(T0 + 60_000, 60_000) == T0 + 60_000


def test_a_new_device_counts_everything_then_its_watermark_closes_the_windows_it_passed() -> None:
    state, store = DeviceState(), Store()
    # Out of order within the batch, spanning two windows; newest 95 s: watermark 65 s.
    routed, _, _ = batch(state, store, [r(70, 1.0), r(10, 3.0), r(95, 2.0), r(0, 5.0)])
    assert routed.late == [] and routed.copies == 0
    assert state.mark_ms == T0 + 65_000
    assert [(start - T0, stats.count, stats.min, stats.max) for start, stats in routed.closed] == [(0, 2, 3.0, 5.0)]
    assert list(state.windows) == [T0 + 60_000] and state.windows[T0 + 60_000].count == 2


def test_the_batch_is_judged_against_the_watermark_at_its_start() -> None:
    state, store = DeviceState(), Store()
    _, late, oldest = batch(state, store, [r(100)])  # watermark 70 s
    # 71 s is ahead of the watermark the batch starts from, though 200 s in the same batch
    # moves it to 170 s: counted. 70 s is at the watermark: late.
    routed, _, _ = batch(state, store, [r(200), r(71, 7.0), r(70, 9.0)], late, oldest)
    assert [reading.event_ms - T0 for reading in routed.late] == [70_000]
    closed = {start - T0: stats for start, stats in routed.closed}
    assert closed[60_000].count == 2 and closed[60_000].min == 7.0  # 100 s and 71 s


def test_the_watermark_never_moves_back() -> None:
    state, store = DeviceState(), Store()
    _, late, oldest = batch(state, store, [r(300)])
    batch(state, store, [r(290)], late, oldest)  # at 290 s: behind 270? no, counted; newest stays 300 s
    assert state.mark_ms == T0 + 270_000 and state.newest_ms == T0 + 300_000


def test_copies_are_dropped_in_the_batch_and_across_batches_but_a_new_sequence_is_a_new_reading() -> None:
    state, store = DeviceState(), Store()
    routed, late, oldest = batch(state, store, [r(10, 1.0, 7), r(10, 1.0, 7), r(10, 1.0, None), r(10, 2.0, 7)])
    assert routed.copies == 1
    routed, _, _ = batch(state, store, [r(10, 1.0, 7), r(10, 1.0, None), r(10, 1.0, 8), r(50)], late, oldest)
    assert routed.copies == 2 and routed.late == []
    closed = {start - T0: stats.count for start, stats in routed.closed}
    assert closed == {} and state.windows[T0].count == 5  # 10 s: (1.0, 7), (1.0, -), (2.0, 7), (1.0, 8); 50 s


def test_a_copy_of_a_counted_reading_behind_the_watermark_is_dropped_not_written_late() -> None:
    state, store = DeviceState(), Store()
    _, late, oldest = batch(state, store, [r(10, 4.0)])
    _, late, oldest = batch(state, store, [r(100)], late, oldest)  # watermark 70 s: the window of 10 s closed
    routed, _, _ = batch(state, store, [r(10, 4.0), r(10, 4.5)], late, oldest)
    assert routed.copies == 1 and [reading.value for reading in routed.late] == [4.5]


def test_a_late_reading_is_written_once_however_many_copies_come() -> None:
    state, store = DeviceState(), Store()
    _, late, oldest = batch(state, store, [r(100)])
    routed, late, oldest = batch(state, store, [r(20, 1.0), r(20, 1.0)], late, oldest)
    assert len(routed.late) == 1 and routed.copies == 1
    routed, _, _ = batch(state, store, [r(20, 1.0)], late, oldest)
    assert routed.late == [] and routed.copies == 1


def test_identities_are_forgotten_past_the_horizon_so_a_much_later_copy_is_late() -> None:
    state, store = DeviceState(), Store()
    _, late, oldest = batch(state, store, [r(10, 4.0)])
    # Watermark 160 s: 10 s is more than 120 s behind it: forgotten, though its minute's blob
    # stays (59 s would still be known) until the watermark reaches 179.999 s.
    _, late, oldest = batch(state, store, [r(190)], late, oldest)
    assert bucket_of(T0 + 10_000) in store.blobs
    routed, late, oldest = batch(state, store, [r(10, 4.0), r(209.999)], late, oldest)
    assert routed.copies == 0 and [reading.value for reading in routed.late] == [4.0]
    assert bucket_of(T0 + 10_000) not in store.blobs


def test_an_identity_within_the_horizon_is_still_known_though_its_window_closed() -> None:
    state, store = DeviceState(), Store()
    _, late, oldest = batch(state, store, [r(59, 4.0)])
    _, late, oldest = batch(state, store, [r(200)], late, oldest)  # watermark 170 s: 59 s is 111 s behind
    routed, _, _ = batch(state, store, [r(59, 4.0)], late, oldest)
    assert routed.copies == 1 and routed.late == []


def test_remembered_by_the_horizon_behind_the_watermark() -> None:
    assert is_remembered(T0 - 119_999, T0, 120_000) and not is_remembered(T0 - 120_000, T0, 120_000)
    assert is_remembered(0, None, 120_000)


@pytest.mark.parametrize("sequence", [None, 0, 5, -3])
def test_packed_identities_come_back_alike_a_null_sequence_apart_from_zero(sequence: int | None) -> None:
    items = [((T0, 21.5, sequence), T0 + 1), ((T0 + 7, -0.0, 1), T0 + 7)]
    assert list(unpack(pack(items))) == items


def test_memory_loads_only_the_buckets_the_readings_fall_in_and_appends_to_them() -> None:
    loaded: list[int] = []
    stored = {
        T0: pack([((T0 + 1, 1.0, None), T0 + 1)]),
        T0 + BUCKET_MS: pack([((T0 + 61_000, 2.0, None), T0 + 61_000)]),
    }

    def load(bucket: int) -> bytes | None:
        loaded.append(bucket)
        return stored.get(bucket)

    memory = Memory(load, oldest_ms=T0)
    assert memory.recall((T0 + 1, 1.0, None)) == T0 + 1
    memory.remember((T0 + 2, 3.0, None), T0 + 2, counted=True)
    assert loaded == [T0]
    writes, gone = memory.forget(T0 + 10_000, RULES.horizon_ms)
    assert gone == [] and list(writes) == [T0]
    assert [identity for identity, _ in unpack(writes[T0])] == [(T0 + 1, 1.0, None), (T0 + 2, 3.0, None)]


def test_memory_removes_whole_buckets_once_their_last_identity_is_past_the_horizon() -> None:
    memory = Memory(lambda bucket: None, oldest_ms=T0)
    # Horizon 120 s: the bucket [T0, T0 + 60 s) is gone once its last millisecond is 120 s or
    # more behind the watermark.
    assert memory.forget(T0 + 179_998, RULES.horizon_ms)[1] == []
    assert memory.forget(T0 + 179_999, RULES.horizon_ms)[1] == [T0]
    assert memory.oldest_ms == T0 + BUCKET_MS


def test_ratios_are_the_probe_over_each_peer_and_the_empty_processor_over_the_full_one() -> None:
    rows = [
        {"run": "tws", "cpu_us_per_row": 200.0, "peak_mib": 1500.0, "rows_per_second": 8000},
        {"run": "empty", "cpu_us_per_row": 100.0, "peak_mib": 1400.0, "rows_per_second": 10000},
    ]
    peers = {"job": {"cpu_us": 160.0, "peak_mib": 1800.0, "per_second": 10000}, "kstreams": {"cpu_us": 50.0}}
    ratios = ratios_of(rows, peers)
    assert ratios["empty_over_tws_cpu_per_row"] == 0.5
    assert ratios["tws_over_job_cpu_per_row"] == 1.25 and ratios["tws_over_kstreams_cpu_per_row"] == 4.0
    assert ratios["empty_over_job_rows_per_second"] == 1.0
    assert "tws_over_kstreams_peak_memory" not in ratios  # the peer's memory was not given
