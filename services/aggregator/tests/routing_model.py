"""The job's routing decision as a plain-Python reference model (no Spark).

Written from the rules, not from ``micro_batch.py``: per micro-batch, against the watermark the
batch starts with,

* a record that does not decode is dead-lettered; a reading written with a schema version
  registered under the input subject decodes, whenever it was registered (the batch that
  first meets its id looks it up), so the model knows no schema ids;
* a reading of the metric with an event time after the watermark is counted;
* one at or behind it is late: written to the late topic once, unless a reading with its
  identity was recorded before and is still remembered: a counted one while its event time,
  a late one while the watermark at its arrival, is within the horizon
  ``max(window size, watermark delay, dedup horizon)`` of the watermark (per device, a
  counted one also while its arrival is within the horizon of the gateways' clock);
* the watermark moves to the newest event time of the batch's readings minus the delay,
  never back;
* every window whose end the watermark passes (in ``(before, after]``) is aggregated from the
  counted readings in it, each identity once, and written once.

Readings of another metric are not the job's: they are ignored.

:class:`RoutingModel` is the rule with one watermark for the whole fleet, which the job had
until decision 0011. :class:`DeviceClockModel` is the job's rule now: lateness judged per
device, each device against its own watermark (the rules above, with "the watermark" being
the reading's own device's); the job's tests run against it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

Identity = tuple[str, int, float, int | None]  # device, event time (ms), value, sequence


@dataclass(frozen=True)
class Reading:
    device_id: str
    event_ms: int
    value: float
    sequence: int | None = None
    unit: str | None = "Cel"
    metric: str = "temperature"
    ingest_ms: int | None = None  # the gateway's clock at receipt; None: the device's clock is right

    @property
    def identity(self) -> Identity:
        return (self.device_id, self.event_ms, self.value, self.sequence)

    @property
    def received_ms(self) -> int:
        return self.event_ms if self.ingest_ms is None else self.ingest_ms


@dataclass(frozen=True)
class Broken:
    """A record that does not decode, as it came."""

    value: bytes


Record = Reading | Broken


@dataclass(frozen=True)
class Stats:
    count: int
    min: float
    max: float
    mean: float
    stddev: float
    first_ms: int
    last_ms: int
    unit: str | None

    def close_to(self, other: Stats) -> bool:
        """Equal, the floating-point sums allowed to differ in their last bits."""
        exact = (self.count, self.min, self.max, self.first_ms, self.last_ms, self.unit)
        if exact != (other.count, other.min, other.max, other.first_ms, other.last_ms, other.unit):
            return False
        return all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
            for a, b in ((self.mean, other.mean), (self.stddev, other.stddev))
        )


WindowKey = tuple[str, int, int]  # device, window start, window end (ms)


@dataclass
class Outputs:
    """What one batch writes."""

    dead: list[bytes] = field(default_factory=list)
    late: list[Identity] = field(default_factory=list)
    aggregates: dict[WindowKey, Stats] = field(default_factory=dict)
    watermark_ms: int = 0


@dataclass
class RoutingModel:
    size_ms: int
    slide_ms: int
    delay_ms: int
    dedup_ms: int = 0
    metric: str = "temperature"
    watermark_ms: int = 0
    # Every reading recorded so far, whether it was counted, and the watermark it arrived at.
    recorded: list[tuple[Reading, bool, int]] = field(default_factory=list)

    @property
    def horizon_ms(self) -> int:
        return max(self.size_ms, self.delay_ms, self.dedup_ms)

    def batch(self, records: Sequence[Record]) -> Outputs:
        before = self.watermark_ms
        readings = [r for r in records if isinstance(r, Reading) and r.metric == self.metric]
        out = Outputs(dead=[r.value for r in records if isinstance(r, Broken)])
        oldest = before - self.horizon_ms
        known = {r.identity for r, counted, arrived in self.recorded if (r.event_ms if counted else arrived) > oldest}
        for reading in readings:
            if reading.event_ms <= before and reading.identity not in known and reading.identity not in out.late:
                out.late.append(reading.identity)
        self.recorded += [(r, r.event_ms > before, before) for r in readings]
        newest = max((r.event_ms for r in readings), default=None)
        after = before if newest is None else max(before, newest - self.delay_ms)
        out.aggregates = self._closing(before, after)
        out.watermark_ms = self.watermark_ms = after
        return out

    def window_starts(self, event_ms: int) -> list[int]:
        last = event_ms // self.slide_ms * self.slide_ms
        return [s for s in range(last, event_ms - self.size_ms, -self.slide_ms)]

    def _closing(self, before: int, after: int) -> dict[WindowKey, Stats]:
        members: dict[WindowKey, dict[Identity, Reading]] = {}
        for reading, counted, _ in self.recorded:
            if not counted:
                continue
            for start in self.window_starts(reading.event_ms):
                end = start + self.size_ms
                if before < end <= after:
                    members.setdefault((reading.device_id, start, end), {}).setdefault(reading.identity, reading)
        return {key: stats(list(window.values())) for key, window in members.items()}


def stats(readings: list[Reading]) -> Stats:
    values = [r.value for r in readings]
    mean = sum(values) / len(values)
    units = [r.unit for r in readings if r.unit is not None]
    return Stats(
        count=len(values),
        min=min(values),
        max=max(values),
        mean=mean,
        stddev=math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)),
        first_ms=min(r.event_ms for r in readings),
        last_ms=max(r.event_ms for r in readings),
        unit=max(units) if units else None,
    )


@dataclass
class DeviceClockModel(RoutingModel):
    """The job's rule (decision 0011): each device is judged against its own watermark,
    ``W(d) = max(E(d), C - o(d)) - delay``, never moving back, where ``E(d)`` is the newest
    event time of the device, ``C`` the newest ingest time of any reading (the gateways'
    clock, which no device sets) and ``o(d)`` the smallest ingest minus event time of the
    device's readings in the last batch that had any, risen by no more than ``C`` moved in
    that batch. A reading is late at or behind its own
    device's watermark at the batch's start; a device's window is written once its own
    watermark passes the window's end. A silent device's watermark still follows ``C``. The
    batch's reported watermark is ``C - delay``."""

    fleet_clock_ms: int | None = None
    newest_event_ms: dict[str, int] = field(default_factory=dict)
    offset_ms: dict[str, int] = field(default_factory=dict)
    device_watermark_ms: dict[str, int] = field(default_factory=dict)

    def batch(self, records: Sequence[Record]) -> Outputs:
        readings = [r for r in records if isinstance(r, Reading) and r.metric == self.metric]
        out = Outputs(dead=[r.value for r in records if isinstance(r, Broken)])
        before = dict(self.device_watermark_ms)
        for reading in readings:
            mark = before.get(reading.device_id)
            if mark is None or reading.event_ms > mark or reading.identity in out.late:
                continue
            if reading.identity not in self._remembered(reading.device_id, mark, self.fleet_clock_ms):
                out.late.append(reading.identity)
        self.recorded += [(r, self._counted(r, before), before.get(r.device_id, 0)) for r in readings]
        self._learn(readings)
        after = self._watermarks()
        out.aggregates = {
            key: value
            for device, mark in after.items()
            for key, value in self._closing_of(device, before.get(device), mark).items()
        }
        self.device_watermark_ms = after
        clock = self.fleet_clock_ms
        out.watermark_ms = self.watermark_ms = 0 if clock is None else max(self.watermark_ms, clock - self.delay_ms)
        return out

    @staticmethod
    def _counted(reading: Reading, before: dict[str, int]) -> bool:
        mark = before.get(reading.device_id)
        return mark is None or reading.event_ms > mark

    def _remembered(self, device: str, mark: int, clock: int | None) -> set[Identity]:
        # A counted reading is also kept by its arrival on the gateways' clock: the batch that
        # counted it may have moved its device's watermark far past it (a new device's first
        # batch, a clock set forward), and a copy within the horizon is still that reading.
        oldest = mark - self.horizon_ms
        since = None if clock is None else clock - self.horizon_ms
        return {
            r.identity
            for r, counted, arrived in self.recorded
            if r.device_id == device
            and (
                (r.event_ms if counted else arrived) > oldest
                or (counted and since is not None and r.received_ms > since)
            )
        }

    def _learn(self, readings: Sequence[Reading]) -> None:
        # A device's offset is that of its freshest reading in the batch (the smallest ingest
        # minus event time): a reading delivered late, or stamped in the past, says nothing
        # of its clock while a fresh one came with it. A rise is believed only as fast as the
        # gateways' clock moved: a batch holding nothing but such readings holds its device
        # back by at most that batch's time.
        before = self.fleet_clock_ms
        fresh: dict[str, int] = {}
        for reading in readings:
            device = reading.device_id
            self.newest_event_ms[device] = max(self.newest_event_ms.get(device, reading.event_ms), reading.event_ms)
            offset = reading.received_ms - reading.event_ms
            fresh[device] = min(fresh.get(device, offset), offset)
            clock = self.fleet_clock_ms
            self.fleet_clock_ms = reading.received_ms if clock is None else max(clock, reading.received_ms)
        moved = 0 if before is None or self.fleet_clock_ms is None else self.fleet_clock_ms - before
        for device, offset in fresh.items():
            known = self.offset_ms.get(device)
            self.offset_ms[device] = offset if known is None else min(offset, known + moved)

    def _watermarks(self) -> dict[str, int]:
        clock = self.fleet_clock_ms
        marks = {}
        for device, newest in self.newest_event_ms.items():
            own = newest if clock is None else max(newest, clock - self.offset_ms[device])
            marks[device] = max(self.device_watermark_ms.get(device, own - self.delay_ms), own - self.delay_ms)
        return marks

    def _closing_of(self, device: str, before: int | None, after: int) -> dict[WindowKey, Stats]:
        members: dict[WindowKey, dict[Identity, Reading]] = {}
        floor = before if before is not None else -(2**62)
        for reading, counted, _ in self.recorded:
            if not counted or reading.device_id != device:
                continue
            for start in self.window_starts(reading.event_ms):
                end = start + self.size_ms
                if floor < end <= after:
                    members.setdefault((device, start, end), {}).setdefault(reading.identity, reading)
        return {key: stats(list(window.values())) for key, window in members.items()}
