"""Decision 0011's lateness rule, in the reference model (the job is held to the model by
``tests/integration/test_device_clocks.py``): one device's clock changes no other device's
aggregates or lateness, whatever its error.

A fleet reports once a second for two minutes through gateways that stamp each reading on
receipt (50 ms after it was made). The batches are what a 5-second trigger would cut. Each
test compares a fleet with wrong clocks against the same fleet without those devices: every
other device's windows and late readings must be the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from device_fleet import DELAY, HOUR, SIZE, SKEWED, T0, batches, fleet, others, outcome
from routing_model import DeviceClockModel, Outputs, Reading, RoutingModel


def run(model: RoutingModel, readings: Sequence[Reading]) -> list[Outputs]:
    return [model.batch(batch) for batch in batches(readings)]


def model() -> DeviceClockModel:
    return DeviceClockModel(size_ms=SIZE, slide_ms=SIZE, delay_ms=DELAY)


def test_devices_hours_ahead_and_behind_change_no_other_devices_windows_or_lateness() -> None:
    with_them = fleet(100, 120, skews=SKEWED)
    without = [r for r in with_them if r.device_id not in SKEWED]
    kept = others(100, SKEWED)
    aggregates, late = outcome(run(model(), with_them), kept)
    expected_aggregates, expected_late = outcome(run(model(), without), kept)
    assert late == expected_late == []
    assert aggregates == expected_aggregates
    assert len(aggregates) == 98 * 11  # 120 s of 10 s windows: 11 closed by the last batch's watermark


def test_a_device_with_a_wrong_clock_gets_its_windows_on_its_own_clock() -> None:
    outputs = run(model(), fleet(100, 120, skews=SKEWED))
    aggregates, late = outcome(outputs, set(SKEWED))
    assert late == []
    ahead = sorted(start for device, start, _ in aggregates if device == "d007")
    assert ahead[0] == T0 + HOUR and len(ahead) == 11


def test_under_the_fleet_wide_watermark_one_device_ahead_sends_everyone_late() -> None:
    """Today's rule (the job's, RoutingModel): what the new one fixes."""
    outputs = run(RoutingModel(size_ms=SIZE, slide_ms=SIZE, delay_ms=DELAY), fleet(100, 120, skews={"d007": HOUR}))
    _, late = outcome(outputs, others(100, ["d007"]))
    assert len(late) > 0.9 * 99 * 120  # nearly every other reading after the first batch


def test_a_silent_device_holds_nothing_open() -> None:
    outputs = run(model(), fleet(10, 120, silent_after={"d003": 30}))
    aggregates, _ = outcome(outputs, {"d003"})
    # its three windows of readings all closed, moved by the others' arrival (the gateways' clock)
    assert sorted(start - T0 for _, start, _ in aggregates) == [0, 10_000, 20_000]
    assert all(value.count == 10 for value in aggregates.values())


def test_a_device_back_after_a_day_is_judged_like_the_others() -> None:
    day = 24 * HOUR
    later = [
        Reading(r.device_id, r.event_ms + day, r.value, ingest_ms=r.received_ms + day)
        for r in fleet(10, 60)
        if r.device_id != "d005" or r.event_ms >= T0 + 30_000  # back for the last 30 s
    ]
    outputs = run(model(), fleet(10, 60) + later)
    aggregates, late = outcome(outputs, {"d005"})
    assert late == []
    returned = sorted((key[1] - T0 - day, value.count) for key, value in aggregates.items() if key[1] >= T0 + day)
    assert returned == [(30_000, 10), (40_000, 10)]  # its windows since it came back, closed like everyone's


def test_a_clock_set_back_makes_only_that_device_late() -> None:
    """An RTC an hour ahead, corrected after 60 s: that device's readings are behind its own
    watermark for a while; no other device notices."""
    wrong = [
        r
        for r in fleet(20, 120, skews={"d009": HOUR})
        if not (r.device_id == "d009" and r.event_ms >= T0 + HOUR + 60_000)
    ]
    right = [r for r in fleet(20, 120) if r.device_id == "d009" and r.event_ms >= T0 + 60_000]
    readings = sorted(wrong + right, key=lambda r: r.received_ms)
    outputs = run(model(), readings)
    kept = others(20, ["d009"])
    assert outcome(outputs, kept) == outcome(run(model(), [r for r in readings if r.device_id != "d009"]), kept)
    _, late = outcome(outputs, {"d009"})
    assert len(late) == 60  # every reading after the correction, until its clock passes the old newest time


def test_a_reading_stamped_in_the_past_does_not_hold_its_device_back() -> None:
    """A device's last batch ends with a reading stamped two minutes in the past (buffered, or
    a late fault) after its fresh ones: its clock is read from the fresh ones, so its windows
    close as if that reading were not there, and the reading is late."""
    readings = fleet(10, 60, silent_after={"d004": 45})
    stale = Reading("d004", T0 + 44_900 - 120_000, 30.0, ingest_ms=T0 + 44_900)  # the last of d004 to arrive
    outputs = run(model(), sorted([*readings, stale], key=lambda r: r.received_ms))
    aggregates, late = outcome(outputs, {"d004"})
    assert aggregates == outcome(run(model(), readings), {"d004"})[0]
    assert sorted(start - T0 for _, start, _ in aggregates) == [0, 10_000, 20_000, 30_000, 40_000]
    assert late == [stale.identity]


def test_a_last_batch_of_nothing_but_a_stale_reading_holds_its_device_back_one_batch_at_most() -> None:
    """The device's last batch holds only a reading stamped two minutes in the past: its
    offset rises by that batch's time, not by two minutes, so its last windows close one
    batch later than they would have, not two minutes later."""
    readings = fleet(10, 70, silent_after={"d004": 45})
    stale = Reading("d004", T0 + 46_000 - 120_000, 30.0, ingest_ms=T0 + 46_000)  # alone in batch [45, 50)
    aggregates, late = outcome(run(model(), sorted([*readings, stale], key=lambda r: r.received_ms)), {"d004"})
    assert sorted(start - T0 for _, start, _ in aggregates) == [0, 10_000, 20_000, 30_000, 40_000]
    assert late == [stale.identity]


def test_a_counted_reading_far_behind_its_device_is_known_to_its_copies_for_the_horizon() -> None:
    """A new device's first batch counts everything, a reading it buffered ten minutes too;
    the batch moves the device's watermark ten minutes past that reading, so by its event time
    it is forgotten at once. A copy redelivered a batch later is the same reading, counted:
    it is dropped, not written late. Kept by its arrival on the gateways' clock, it is let go
    once that clock has moved the horizon on (a copy after that is late, once)."""
    m = DeviceClockModel(size_ms=SIZE, slide_ms=SIZE, delay_ms=DELAY, dedup_ms=60_000)
    fresh = Reading("d1", T0, 20.0, 2, ingest_ms=T0 + 50)
    buffered = Reading("d1", T0 - 600_000, 19.0, 1, ingest_ms=T0 + 50)
    first = m.batch([buffered, fresh])
    assert first.late == [] and any(start == T0 - 600_000 for _, start, _ in first.aggregates)
    again = m.batch([buffered, Reading("d1", T0 + 5_000, 20.5, 3, ingest_ms=T0 + 5_050)])
    assert again.late == []
    m.batch([Reading("d1", T0 + 70_000, 21.0, 4, ingest_ms=T0 + 70_050)])  # the gateways' clock 70 s on
    assert m.batch([buffered, Reading("d1", T0 + 71_000, 21.0, 5, ingest_ms=T0 + 71_050)]).late == [buffered.identity]


def test_a_counted_reading_a_jump_of_its_device_left_behind_is_known_to_its_copies() -> None:
    """A known device whose batch holds a reading just ahead of its watermark and one an hour
    ahead (its clock set forward): the first is counted, then left an hour behind the
    device's new watermark; its copy a batch later is dropped, not written late."""
    m = DeviceClockModel(size_ms=SIZE, slide_ms=SIZE, delay_ms=DELAY, dedup_ms=60_000)
    m.batch([Reading("d1", T0, 20.0, 1, ingest_ms=T0 + 50)])
    counted = Reading("d1", T0 + 1_000, 20.5, 2, ingest_ms=T0 + 1_050)
    jumped = Reading("d1", T0 + HOUR, 21.0, 3, ingest_ms=T0 + 1_100)
    assert m.batch([counted, jumped]).late == []
    assert m.batch([counted, Reading("d1", T0 + HOUR + 1_000, 21.0, 4, ingest_ms=T0 + 2_100)]).late == []
