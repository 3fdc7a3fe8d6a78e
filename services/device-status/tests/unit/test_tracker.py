"""The timer: when it may judge a partition's silences, and as of which time.

Kafka and the table's stream context are replaced here (the timer's arithmetic is the
subject); the same behaviour runs against the real servers in the integration tests.
"""

from __future__ import annotations

import gc
import random
from copy import deepcopy
from types import SimpleNamespace
from typing import Any

import faust
import pytest
import structlog.testing
from faust.exceptions import NotReady

from fluxgate_core.errors import ConsumeError
from fluxgate_device_status.codec import pack, unpack
from fluxgate_device_status.deadlines import Deadlines
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
    devices.table.data[b"dev-1"] = pack(apply_reading(None, reading, HEARD_MS)[0])
    devices._on_restored(None)  # as a takeover leaves it: the table restored, the deadlines indexed from it
    devices.read, devices.newest_sent = {0: 5}, {0: HEARD_MS}
    devices.restore_ends, devices.watch_start = {0: 6}, {0: HEARD_MS - 10_000}
    return devices, checks


def test_a_restore_unpacks_each_entry_once_and_logs_the_devices_it_indexed(monkeypatch: Any) -> None:
    """A million devices take seconds to unpack: the log's count comes from the index."""
    import fluxgate_device_status.tracker as tracker_module

    unpacked: list[bytes] = []

    def counting(real: Any) -> Any:
        def unpacking(packed: bytes) -> Any:
            unpacked.append(packed)
            return real(packed)

        return unpacking

    devices = tracker(Ends(None))
    devices.active_partitions = lambda: {0}  # type: ignore[method-assign]
    for n in range(3):
        reading = Reading(f"dev-{n}", "temperature", 21.5, "Cel", HEARD_MS - 5, HEARD_MS, "MQTT", "t", 0, n)
        devices.table.data[f"dev-{n}".encode()] = pack(apply_reading(None, reading, HEARD_MS)[0])
    monkeypatch.setattr(tracker_module, "unpack_restored", counting(tracker_module.unpack_restored))
    monkeypatch.setattr(tracker_module, "unpack", counting(tracker_module.unpack))
    with structlog.testing.capture_logs() as logs:
        devices._on_restored(None)
    assert len(unpacked) == 3
    assert [e["devices"] for e in logs if e["event"] == "table.restored"] == [3]


def test_a_restore_unpacks_only_the_entries_of_its_active_partitions(monkeypatch: Any) -> None:
    """A standby partition's entries wait in the store, not unpacked, until they are owned; an
    entry the store knows no partition of is unpacked and judged by its own."""
    import fluxgate_device_status.tracker as tracker_module

    unpacked: list[bytes] = []
    real = tracker_module.unpack_restored
    monkeypatch.setattr(tracker_module, "unpack_restored", lambda packed: unpacked.append(packed) or real(packed))
    devices = tracker(Ends(None))
    devices.active_partitions = lambda: {0}  # type: ignore[method-assign]
    for n, partition in enumerate([0, 0, 1, 1, 1]):
        reading = Reading(f"dev-{n}", "temperature", 21.5, "Cel", HEARD_MS - 5, HEARD_MS, "MQTT", "t", partition, n)
        devices.table.data[f"dev-{n}".encode()] = pack(apply_reading(None, reading, HEARD_MS)[0])
        if n != 1:  # dev-1's partition unknown to the store
            devices.table.data._key_partition[f"dev-{n}".encode()] = partition
    devices.table.data[b"not-a-state"] = b"\x00"  # on a standby partition: not judged here
    devices.table.data._key_partition[b"not-a-state"] = 1
    with structlog.testing.capture_logs() as logs:
        devices._on_restored(None)
    assert len(unpacked) == 2
    assert [(e["devices"], e["partitions"]) for e in logs if e["event"] == "table.restored"] == [(2, [0])]
    assert b"not-a-state" in devices.table.data and devices.read == {0: 1}


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


class Table:
    """The device table as the tracker uses it, counting the entries read one by one; with
    ``walkable`` false, a walk of the whole table (``items``, ``values``) fails the test."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.gets = 0
        self.walkable = True

    def get(self, key: bytes) -> bytes | None:
        self.gets += 1
        return self.data.get(key)

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.data[key] = value

    def items(self) -> Any:
        assert self.walkable, "the table was walked"
        return self.data.items()

    def values(self) -> Any:
        assert self.walkable, "the table was walked"
        return self.data.values()


class Statuses:
    """The status topic: the transitions written."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def send(self, key: str, value: dict[str, Any]) -> None:
        self.sent.append((key, value["status"]))


class CheckStream:
    """The silence-check topic's stream, as the agent reads it."""

    def __init__(self, checks: list[tuple[bytes, int, int]]) -> None:
        self.checks = checks

    async def events(self) -> Any:
        for key, at, partition in self.checks:
            yield SimpleNamespace(key=key, value={"checked_at_ms": at}, message=SimpleNamespace(partition=partition))


class Fleet:
    """A tracker owning ``owned`` input partitions, caught up and watched since
    ``HEARD_MS - THRESHOLD_MS`` (so a device is silent from its own deadline on), with the
    table, the checks and the status topic replaced; readings go through ``on_reading`` and
    checks through ``_decide_silence``, as the agents would."""

    def __init__(self, owned: set[int]) -> None:
        self.owned = owned
        self.clock = Clock(HEARD_MS)
        self.devices = tracker(Ends({0: 0, 1: 0, 2: 0}), self.clock)  # nothing waits: judged as of now
        self.table, self.checks, self.statuses = Table(), Checks(), Statuses()
        self.devices.table, self.devices.checks, self.devices.status = self.table, self.checks, self.statuses  # type: ignore[assignment]
        self.devices.settled = lambda: True  # type: ignore[method-assign]
        self.devices.active_partitions = lambda: self.owned  # type: ignore[method-assign]
        self.offset = 0
        self.restore()

    def restore(self) -> None:
        self.devices._on_restored(None)
        self.devices.restore_ends = dict.fromkeys(self.owned, 0)
        self.devices.watch_start = dict.fromkeys(self.owned, HEARD_MS - THRESHOLD_MS)

    async def hear(self, device: str, at: int) -> None:
        self.clock.now = at
        self.offset += 1
        partition = int(device[1:]) % 3
        reading = Reading(
            device, "temperature", 20.0, "Cel", at - 5, at, "MQTT", f"sensors/{device}", partition, self.offset
        )
        await self.devices.on_reading(reading)

    async def tick(self, at: int) -> list[bytes]:
        """The devices the tick asked about."""
        self.clock.now, self.checks.sent, self.table.gets = at, [], 0
        await self.devices._tick()
        return sorted(key for key, _, _ in self.checks.sent)

    async def decide(self) -> None:
        """The silence-check agent deciding every check the last tick sent."""
        await self.devices._decide_silence(CheckStream(self.checks.sent))

    def counts(self) -> dict[str, float | None]:
        from prometheus_client import REGISTRY

        return {s: REGISTRY.get_sample_value("fluxgate_status_devices", {"status": s}) for s in ("ONLINE", "OFFLINE")}

    def walked(self) -> dict[str, float]:
        """The counts as the tick used to make them: every entry of the owned partitions."""
        states = [s for s in map(unpack, self.table.data.values()) if s["partition"] in self.owned]
        return {s: float(sum(1 for state in states if state["status"] == s)) for s in ("ONLINE", "OFFLINE")}


def keys(*devices: int) -> list[bytes]:
    return sorted(f"d{i}".encode() for i in devices)


async def test_a_tick_reads_only_the_devices_due_and_never_walks_the_table() -> None:
    fleet = Fleet({0, 1, 2})
    for i in range(1000):
        await fleet.hear(f"d{i}", HEARD_MS + 10 * i)  # d{i} is due from HEARD_MS + 10 i + the threshold
    fleet.table.walkable = False

    assert await fleet.tick(HEARD_MS + THRESHOLD_MS + 95) == keys(*range(10))
    assert fleet.table.gets == 10
    # As of now, each on its device's own partition.
    assert {at for _, at, _ in fleet.checks.sent} == {HEARD_MS + THRESHOLD_MS + 95}
    assert {int(key[1:]) % 3 == partition for key, _, partition in fleet.checks.sent} == {True}
    await fleet.decide()
    assert sorted(fleet.statuses.sent[1000:]) == sorted((f"d{i}", "OFFLINE") for i in range(10))

    assert await fleet.tick(HEARD_MS + THRESHOLD_MS + 195) == keys(*range(10, 20))  # the OFFLINE ones are not read
    assert fleet.table.gets == 10
    assert fleet.counts() == {"ONLINE": 990, "OFFLINE": 10}
    assert await fleet.tick(HEARD_MS + THRESHOLD_MS + 195) == keys(*range(10, 20))  # not decided yet: asked again
    assert await fleet.tick(HEARD_MS + 5_000) == []  # before anyone's deadline: nothing read
    assert fleet.table.gets == 0


async def test_the_devices_held_give_the_garbage_collector_nothing_to_walk() -> None:
    """A full collection walks every object it tracks while holding the GIL, and the consumer's
    heartbeat thread waits for it: with a state per device tracked, a million devices stalled
    the process for seconds at each one. Held packed, the devices add nothing to walk."""
    fleet = Fleet({0, 1, 2})
    gc.collect()
    before = len(gc.get_objects())
    for i in range(1000):
        await fleet.hear(f"d{i}", HEARD_MS + i)
    gc.collect()
    assert len(fleet.table.data) == 1000
    assert len(gc.get_objects()) - before < 50


async def test_counts_stay_exact_through_online_offline_online() -> None:
    fleet = Fleet({0, 1, 2})
    await fleet.hear("d1", HEARD_MS)
    await fleet.hear("d2", HEARD_MS)
    await fleet.tick(HEARD_MS + 1)
    assert fleet.counts() == fleet.walked() == {"ONLINE": 2, "OFFLINE": 0}

    await fleet.hear("d2", HEARD_MS + 30_000)
    assert await fleet.tick(HEARD_MS + THRESHOLD_MS) == keys(1)
    assert fleet.counts() == fleet.walked() == {"ONLINE": 2, "OFFLINE": 0}  # asked about, still ONLINE
    await fleet.decide()
    await fleet.tick(HEARD_MS + THRESHOLD_MS + 1)
    assert fleet.counts() == fleet.walked() == {"ONLINE": 1, "OFFLINE": 1}

    await fleet.hear("d1", HEARD_MS + THRESHOLD_MS + 2)
    await fleet.tick(HEARD_MS + THRESHOLD_MS + 3)
    assert fleet.counts() == fleet.walked() == {"ONLINE": 2, "OFFLINE": 0}
    assert fleet.statuses.sent == [("d1", "ONLINE"), ("d2", "ONLINE"), ("d1", "OFFLINE"), ("d1", "ONLINE")]


async def test_a_device_heard_after_its_check_stays_online_and_is_due_again_at_its_new_deadline() -> None:
    fleet = Fleet({0, 1, 2})
    await fleet.hear("d1", HEARD_MS)
    assert await fleet.tick(HEARD_MS + THRESHOLD_MS) == keys(1)
    await fleet.hear("d1", HEARD_MS + THRESHOLD_MS + 500)  # before the check is decided
    await fleet.decide()
    assert fleet.statuses.sent == [("d1", "ONLINE")]  # the re-check kept it ONLINE
    assert await fleet.tick(HEARD_MS + 2 * THRESHOLD_MS + 499) == []
    assert fleet.table.gets == 0
    assert await fleet.tick(HEARD_MS + 2 * THRESHOLD_MS + 500) == keys(1)


async def test_a_revoked_partitions_devices_leave_the_counts_and_the_index() -> None:
    fleet = Fleet({0, 1, 2})
    for i in range(9):
        await fleet.hear(f"d{i}", HEARD_MS)
    await fleet.tick(HEARD_MS + 1)
    assert fleet.counts() == {"ONLINE": 9, "OFFLINE": 0}

    fleet.owned = {0, 1}  # partition 2 went to another instance; its entries may stay as a standby copy
    assert await fleet.tick(HEARD_MS + THRESHOLD_MS) == keys(0, 1, 3, 4, 6, 7)
    assert fleet.counts() == fleet.walked() == {"ONLINE": 6, "OFFLINE": 0}
    assert set(fleet.devices.deadlines.partitions) == {0, 1}

    fleet.devices._on_revoked(None)  # a rebalance: revoked, then restored with partition 0 only
    fleet.owned = {0}
    fleet.restore()
    assert set(fleet.devices.deadlines.partitions) == {0}
    assert await fleet.tick(HEARD_MS + THRESHOLD_MS) == keys(0, 3, 6)
    assert fleet.counts() == fleet.walked() == {"ONLINE": 3, "OFFLINE": 0}


def snapshot(deadlines: Deadlines, times: list[int]) -> dict[int, Any]:
    """What an index says: per partition, the ONLINE devices with their deadlines, the OFFLINE
    ones, and which would be due at each of ``times`` (asked of a copy: ``due`` reorders the heap)."""
    copy = deepcopy(deadlines)
    return {
        p: (index.online, index.offline, [sorted(copy.due(p, at)) for at in times])
        for p, index in deadlines.partitions.items()
    }


async def test_an_index_rebuilt_after_a_restore_equals_the_one_built_reading_by_reading() -> None:
    fleet = Fleet({0, 1, 2})
    rng = random.Random(3)
    now = HEARD_MS
    for _ in range(20):  # readings, ticks and decided checks, interleaved
        for i in rng.sample(range(300), 40):
            now += rng.randrange(0, 200)
            await fleet.hear(f"d{i}", now)
        now += rng.randrange(0, THRESHOLD_MS // 2)
        await fleet.tick(now)
        await fleet.decide()
    assert 0 < fleet.walked()["OFFLINE"] < fleet.walked()["ONLINE"]  # both statuses, and transitions both ways
    times = [now + step * THRESHOLD_MS // 4 for step in range(6)]
    built = snapshot(fleet.devices.deadlines, times)

    fleet.restore()
    assert snapshot(fleet.devices.deadlines, times) == built


async def test_transitions_are_logged_as_one_count_per_tick_not_a_line_per_device() -> None:
    fleet = Fleet({0, 1, 2})
    with structlog.testing.capture_logs() as logs:
        for i in range(100):
            await fleet.hear(f"d{i}", HEARD_MS)  # a fleet starting up: every device turns ONLINE
        await fleet.tick(HEARD_MS + 1)
        await fleet.tick(HEARD_MS + 2)  # nothing turned since: no line
        assert await fleet.tick(HEARD_MS + THRESHOLD_MS) == keys(*range(100))
        await fleet.decide()
        await fleet.tick(HEARD_MS + THRESHOLD_MS + 1)
    info = [entry for entry in logs if entry["log_level"] != "debug" and entry["event"].startswith("device")]
    assert info == [
        {"event": "devices.transitions", "log_level": "info", "online": 100},
        {"event": "devices.transitions", "log_level": "info", "offline": 100},
    ]
    assert {entry["log_level"] for entry in logs if entry["event"] == "device.transition"} <= {"debug"}


async def test_devices_are_routable_once_the_producer_knows_the_changelog_s_partitions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """faust routes GET /devices/{id} by the producer's metadata of the changelog; until it has it
    the request fails (a 500), so the service is not ready before the producer was asked for it."""
    devices = tracker(Ends({}))
    asked: list[str] = []

    class Client:
        async def add_topic(self, topic: str) -> None:
            asked.append(f"keep {topic}")

    class Producer:
        client = Client()

        async def partitions_for(self, topic: str) -> set[int]:
            asked.append(topic)
            return {0, 1, 2}

    monkeypatch.setattr(devices.app.producer, "_ensure_producer", Producer, raising=False)
    assert devices.routable is False
    await devices._learn_the_changelog()
    changelog = "status-test-devices-changelog"
    assert asked == [f"keep {changelog}", changelog] and devices.routable is True


class GoneProducer(Checks):
    """The silence-check topic once faust has stopped the producer under the timer."""

    async def send(self, key: bytes, value: dict[str, int], partition: int) -> None:
        raise NotReady("Producer service not yet started")


async def test_a_tick_that_outlives_the_producer_while_stopping_leaves_the_device_due(monkeypatch: Any) -> None:
    """faust stops the producer while the timer's last tick runs: the check is left to the
    partition's next owner, and the worker exits 0 instead of crashing on SIGTERM."""
    clock = Clock(HEARD_MS + 2 * THRESHOLD_MS)
    devices, checks = watched_silent_device(Ends({0: 6}), clock)
    devices.checks = GoneProducer()  # type: ignore[assignment]
    monkeypatch.setattr(StatusApp, "should_stop", property(lambda app: True))
    with structlog.testing.capture_logs() as logs:
        await devices._tick()  # no error escapes
    assert [e["partition"] for e in logs if e["event"] == "silence_checks.left_to_next_owner"] == [0]
    assert devices.deadlines.due(0, clock.now) == [b"dev-1"]  # still due: asked again once sent
    devices.checks = checks  # type: ignore[assignment]
    monkeypatch.setattr(StatusApp, "should_stop", property(lambda app: False))
    await devices._tick()
    assert checks.sent == [(b"dev-1", clock.now, 0)]


async def test_a_producer_that_is_not_ready_while_running_is_an_error(monkeypatch: Any) -> None:
    devices, _ = watched_silent_device(Ends({0: 6}), Clock(HEARD_MS + 2 * THRESHOLD_MS))
    devices.checks = GoneProducer()  # type: ignore[assignment]
    monkeypatch.setattr(StatusApp, "should_stop", property(lambda app: False))
    with pytest.raises(NotReady):
        await devices._tick()
