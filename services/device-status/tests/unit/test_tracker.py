"""The timer: when it may judge a partition's silences, and as of which time.

Kafka and the table's stream context are replaced here (the timer's arithmetic is the
subject); the same behaviour runs against the real servers in the integration tests.
"""

from __future__ import annotations

from typing import Any

import faust

from fluxgate_core.errors import ConsumeError
from fluxgate_device_status.device_state import Reading, apply_reading
from fluxgate_device_status.settings import DeviceStatusSettings
from fluxgate_device_status.tracker import DeviceTracker
from fluxgate_device_status.transport import StatusApp

THRESHOLD_MS = 60_000  # the settings' default
HEARD_MS = 1_000_000  # when the device's last reading was sent and processed


class Ends:
    """End offsets as Kafka would give them, or a failure while it is away (None)."""

    def __init__(self, ends: dict[int, int] | None) -> None:
        self.known = ends
        self.asked = 0

    async def ends(self, topic: str, partitions: list[int]) -> dict[int, int]:
        self.asked += 1
        if self.known is None:
            raise ConsumeError(f"end offsets of {topic} {partitions}: _TIMED_OUT", retriable=True)
        return {p: self.known[p] for p in partitions}


class Checks:
    """The silence-check topic: what the timer asked to be decided."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, int, int]] = []

    async def send(self, key: bytes, value: dict[str, int], partition: int) -> None:
        self.sent.append((key, value["checked_at_ms"], partition))


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def tracker(ends: Ends, clock: Clock | None = None) -> DeviceTracker:
    app = StatusApp("status-test", broker="kafka://127.0.0.1:1")
    codec: Any = faust.Codec()
    return DeviceTracker(app, DeviceStatusSettings(), codec, codec, ends, clock or Clock(0))


async def test_no_partition_is_watched_while_its_end_is_unknown_and_the_next_tick_asks_again() -> None:
    ends = Ends(None)
    devices = tracker(ends)
    devices.read = {0: 9, 1: 4}
    devices._start_watching({0, 1}, await devices._input_ends({0, 1}), now=1_000)  # no error escapes the timer
    assert devices.watch_start == {}  # unwatched partitions judge no silence: no OFFLINE invented
    ends.known = {0: 10, 1: 7}
    devices._start_watching({0, 1}, await devices._input_ends({0, 1}), now=2_000)
    assert ends.asked == 2
    assert devices.watch_start == {0: 2_000}  # 1 has not caught up with its end yet


async def test_a_busy_input_is_watched_once_it_reaches_the_end_it_had_after_the_restore() -> None:
    devices = tracker(Ends(None))
    devices.read = {0: 7}
    devices._start_watching({0}, {0: 10}, now=1_000)
    devices.read = {0: 9}
    devices._start_watching({0}, {0: 30}, now=2_000)  # readings keep coming: the end moved on
    assert devices.watch_start == {0: 2_000}


def watched_silent_device(ends: Ends, clock: Clock) -> tuple[DeviceTracker, Checks]:
    """A tracker owning partition 0, caught up since the restore, whose one device was last
    heard at ``HEARD_MS`` (offset 5); the timer ticks at ``clock``."""
    devices = tracker(ends, clock)
    checks = Checks()
    devices.checks = checks  # type: ignore[assignment]
    devices.settled = lambda: True  # type: ignore[method-assign]
    devices.active_partitions = lambda: {0}  # type: ignore[method-assign]
    reading = Reading("dev-1", "temperature", 21.5, "Cel", HEARD_MS - 5, HEARD_MS, "MQTT", "sensors/dev-1", 0, 5)
    devices.table.data[b"dev-1"] = apply_reading(None, reading, HEARD_MS)[0]
    devices.read, devices.newest_sent = {0: 5}, {0: HEARD_MS}
    devices.restore_ends, devices.watch_start = {0: 6}, {0: HEARD_MS - 10_000}
    return devices, checks


async def test_silence_is_judged_as_of_now_when_every_reading_sent_by_now_is_processed() -> None:
    clock = Clock(HEARD_MS + 2 * THRESHOLD_MS)
    devices, checks = watched_silent_device(Ends({0: 6}), clock)
    await devices._tick()
    assert checks.sent == [(b"dev-1", clock.now, 0)]


async def test_a_stalled_consumer_does_not_take_the_readings_it_has_yet_to_process_for_silence() -> None:
    """Three records wait on partition 0 (its end is 9, offset 5 was the last processed): the
    device's next reading may be among them. Judged as of the newest record processed, the
    device was heard 0 ms before: no check, however late the wall clock."""
    clock = Clock(HEARD_MS + 10 * THRESHOLD_MS)
    devices, checks = watched_silent_device(Ends({0: 9}), clock)
    await devices._tick()
    assert checks.sent == []
    devices.newest_sent = {0: HEARD_MS + THRESHOLD_MS}  # the consumer moved on: other devices' readings
    await devices._tick()
    assert checks.sent == [(b"dev-1", HEARD_MS + THRESHOLD_MS, 0)]  # silent for the threshold, as of then


async def test_nothing_is_judged_while_kafka_does_not_say_where_the_input_ends() -> None:
    devices, checks = watched_silent_device(Ends(None), Clock(HEARD_MS + 10 * THRESHOLD_MS))
    await devices._tick()
    assert checks.sent == []


async def test_each_owned_partitions_lag_is_shown_and_a_revoked_one_is_not() -> None:
    from prometheus_client import REGISTRY

    def lag(partition: int) -> float | None:
        labels = {"topic": "sensors.readings", "partition": str(partition)}
        return REGISTRY.get_sample_value("fluxgate_status_consumer_lag", labels)

    devices, _ = watched_silent_device(Ends({0: 9, 1: 4}), Clock(HEARD_MS))
    devices.active_partitions = lambda: {0, 1}  # type: ignore[method-assign]
    devices.read = {0: 5}  # offsets 6, 7 and 8 wait; nothing of partition 1 was read yet
    await devices._tick()
    assert (lag(0), lag(1)) == (3, 4)

    devices.active_partitions = lambda: {0}  # type: ignore[method-assign]  # 1 went to another instance
    devices.read = {0: 8}
    await devices._tick()
    assert (lag(0), lag(1)) == (0, None)
