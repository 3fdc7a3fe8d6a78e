"""The timer's catch-up bookkeeping when Kafka does not say where the input ends."""

from __future__ import annotations

from typing import Any

import faust

from fluxgate_core.errors import ConsumeError
from fluxgate_device_status.settings import DeviceStatusSettings
from fluxgate_device_status.tracker import DeviceTracker
from fluxgate_device_status.transport import StatusApp


class Ends:
    """End offsets as Kafka would give them, or a failure while it is away."""

    def __init__(self, ends: dict[int, int] | None) -> None:
        self.known = ends
        self.asked = 0

    async def ends(self, topic: str, partitions: list[int]) -> dict[int, int]:
        self.asked += 1
        if self.known is None:
            raise ConsumeError(f"end offsets of {topic} {partitions}: _TIMED_OUT", retriable=True)
        return {p: self.known[p] for p in partitions}


def tracker(ends: Ends) -> DeviceTracker:
    app = StatusApp("status-test", broker="kafka://127.0.0.1:1")
    codec: Any = faust.Codec()
    return DeviceTracker(app, DeviceStatusSettings(), codec, codec, ends)  # type: ignore[arg-type]


async def test_no_partition_is_watched_while_its_end_is_unknown_and_the_next_tick_asks_again() -> None:
    ends = Ends(None)
    devices = tracker(ends)
    devices.read = {0: 9, 1: 4}
    await devices._start_watching({0, 1}, now=1_000)  # Kafka away: no error escapes the timer
    assert devices.watch_start == {}  # unwatched partitions judge no silence: no OFFLINE invented
    ends.known = {0: 10, 1: 7}
    await devices._start_watching({0, 1}, now=2_000)
    assert ends.asked == 2
    assert devices.watch_start == {0: 2_000}  # 1 has not caught up with its end yet
