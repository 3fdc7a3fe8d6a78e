"""The faust wiring of the device table: readings in, silence checks, transitions out.

The table can only be written from inside a stream (faust writes the changelog to the
partition of the event being processed), so the timer does not mark devices OFFLINE
itself: it sends a silence check for each device it finds silent to an internal topic,
on the device's own partition, and an agent there decides again against the table (a
reading may have arrived since) and writes the transition.

The timer does not walk the table: ``deadlines.py`` indexes, beside it, when each owned
device turns silent and how many are ONLINE and OFFLINE, updated wherever the table is
written here and rebuilt from the table after each restore. A tick reads from the table
only the devices the index says are due, and judges them on what the table says.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import faust
import structlog
from faust.exceptions import NotReady

from fluxgate_core.backoff import Backoff
from fluxgate_core.errors import ConsumeError
from fluxgate_device_status import metrics
from fluxgate_device_status.codec import AwaitingRegistry, Undecodable, pack, unpack, unpack_restored
from fluxgate_device_status.deadlines import Deadlines
from fluxgate_device_status.device_state import (
    CatchUp,
    Reading,
    State,
    Status,
    apply_reading,
    caught_up,
    is_replay,
    is_silent,
    mark_offline,
    transition_record,
)
from fluxgate_device_status.end_offsets import EndOffsets
from fluxgate_device_status.settings import DeviceStatusSettings

log = structlog.get_logger(__name__)
Clock = Callable[[], int]
# A reading whose writer schema the registry did not give is decoded again after up to
# 0.5 s, then 1, 2, ... up to every 10 s (jittered), until it answers.
REGISTRY_BACKOFF_S = (0.5, 10.0)


def wall_ms() -> int:
    return int(time.time() * 1000)


async def keep_in_metadata(producer: Any, topic: str) -> None:
    """Have an aiokafka ``producer`` know ``topic``'s partitions from now on. Its metadata holds
    only the topics it was told of once it has been told of any: asked for by name a topic its
    metadata already had (faust's refresh of every topic after creating its own) is found at
    once and not added, and the next topic the producer sends to (the first silence check)
    makes a refresh of that topic alone, which drops it."""
    await producer.client.add_topic(topic)
    await producer.partitions_for(topic)


class DeviceTracker:
    """Owns the table, the agents and the timer of one faust app."""

    def __init__(
        self,
        app: faust.App,
        settings: DeviceStatusSettings,
        readings_codec: faust.Codec,
        status_codec: faust.Codec,
        end_offsets: EndOffsets,
        clock: Clock = wall_ms,
    ) -> None:
        self.app = app
        self.settings = settings
        self.threshold_ms = int(settings.silence_threshold_s * 1000)
        self.clock = clock
        self.end_offsets = end_offsets
        # partition -> when this instance started watching it (see device_state.py on restarts)
        self.watch_start: dict[int, int] = {}
        self.deadlines = Deadlines(self.threshold_ms)
        # Raw UTF-8 keys (bytes), as the gateways write them: faust routes ``GET /devices/{id}``
        # by partitioning the changelog's serialized key, which must equal the input's key.
        # (A str key type would get faust's default key serializer, JSON: the id in quotes.)
        # A standby applies each changelog record as it comes (faust's default buffers a thousand
        # before applying them, so a quiet fleet's standby copy would stay empty until the takeover).
        # Values are each device's state packed (``codec.pack``: its JSON, as bytes): faust
        # loads them raw, so an entry written by something else cannot stop the recovery,
        # and the restore leaves out what is not a state (``_restored_entries``).
        self.table = app.Table(
            "devices", key_type=bytes, value_type=bytes, partitions=settings.partitions, standby_buffer_size=1
        )
        self.readings = app.topic(
            settings.input_topic, key_type=str, key_serializer="raw", value_serializer=readings_codec
        )
        self.checks = app.topic(
            f"{settings.app_id}-silence-checks",
            key_type=bytes,
            key_serializer="raw",
            value_serializer="json",
            partitions=settings.partitions,
            internal=True,
        )
        self.status = app.topic(
            settings.status_topic, key_type=str, key_serializer="raw", value_serializer=status_codec
        )
        app.agent(self.readings, name="track-readings")(self._track_readings)
        app.agent(self.checks, name="decide-silence")(self._decide_silence)
        app.timer(settings.timer_interval_s, name="silence-timer")(self._tick)
        self.restored = False
        self.read: dict[int, int] = {}  # partition -> highest input offset read or counted in the table
        self.restore_ends: dict[int, int] = {}  # partition -> input end offset first asked for after the restore
        self.newest_sent: dict[int, int] = {}  # partition -> Kafka timestamp of the newest input record processed
        self.resumed: set[int] = set()
        self.lag_shown: set[int] = set()  # partitions with a fluxgate_status_consumer_lag series
        self.transitions: Counter[str] = Counter()  # status -> devices turned to it since the last tick
        self.routable = False  # the producer knows the changelog's partitions (_learn_the_changelog)
        app.task(self._learn_the_changelog)
        app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]  # mode types receivers narrower than it calls them
        app.on_rebalance_complete.connect(self._on_restored)  # type: ignore[arg-type]

    async def _learn_the_changelog(self) -> None:
        """``GET /devices/{id}`` is routed by the producer's partitions of the changelog (faust's
        ``Router.key_store``, which computes the key's partition at once: a topic missing from the
        producer's metadata fails the request with a TypeError, a 500). faust refreshes that
        metadata right after creating the topic, when a new topic may still be without leaders and
        so left out of the answer, and then not before the first changelog write or
        metadata.max.age (5 minutes). Asked for by name, the producer waits until they are there."""
        producer = self.app.producer._ensure_producer()  # type: ignore[attr-defined]  # aiokafka's, not on ProducerT
        await keep_in_metadata(producer, self.table.changelog_topic.get_topic_name())
        self.routable = True

    def _on_revoked(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        self.restored = False
        self.resumed.clear()
        self.watch_start.clear()

    def _on_restored(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        """The tables are restored; the input is about to flow again. Nothing is awaited
        here (it would hold up the end of faust's recovery): the end offsets are asked for
        at the next tick instead (later, so if anything more than needed is waited for)."""
        self.read = {}
        began, active = time.monotonic(), self.active_partitions()
        # The changelog wrote the table without the tracker: indexed afresh, once per restore.
        self.deadlines.rebuild(self._restored_entries(active), active)
        self.restore_ends = {}
        self.newest_sent = {}
        self.watch_start = {}
        self.restored = True
        # Counted from the index just built: the table's entries are unpacked once per restore.
        log.info("table.restored", partitions=sorted(active), devices=sum(self.deadlines.counts(active).values()),
                 seconds=round(time.monotonic() - began, 3))  # fmt: skip

    def _restored_entries(self, partitions: set[int]) -> Iterator[tuple[bytes, State]]:
        """Each restored entry of ``partitions`` unpacked once, noting the highest input offset
        the table counted per partition (``self.read``). An entry that is not a device state
        (written by something else, or by a version that kept other fields) is dropped from this
        instance's memory only, so the device starts afresh at its next reading, whose entry
        replaces it."""
        unreadable: list[bytes] = []
        # The store knows each entry's changelog partition, which is its input partition (the
        # table is co-partitioned with the input): a standby partition's entries are not
        # unpacked. An entry the store has no partition for is unpacked and judged by its own.
        # 300,000 devices, a third of them active: 0.40 s instead of 0.99 s.
        partition_of: dict[bytes, int] = getattr(self.table.data, "_key_partition", {})
        for key, packed in self.table.data.items():
            if (partition := partition_of.get(key)) is not None and partition not in partitions:
                continue
            state = unpack_restored(packed)
            if isinstance(state, Undecodable):
                unreadable.append(key)
                metrics.UNREADABLE_ENTRIES.inc()
                log.warning("table.entry_unreadable", topic=self.table.changelog_topic.get_topic_name(),
                            key=repr(key), reason=state.reason)  # fmt: skip
                continue
            self.read[state["partition"]] = max(self.read.get(state["partition"], -1), int(state["offset"]))
            yield key, state
        for key in unreadable:
            self.table.data.pop(key, None)

    def _state(self, key: bytes) -> State | None:
        packed: bytes | None = self.table.get(key)
        return None if packed is None else unpack(packed)

    def _states(self) -> Iterator[State]:
        return (unpack(packed) for packed in self.table.values())

    async def _track_readings(self, stream: Any) -> None:
        async for event in stream.events():
            value = event.value
            if isinstance(value, AwaitingRegistry):
                value = await self._when_registry_answers(value, event.message)
            if isinstance(value, Undecodable):
                metrics.UNDECODABLE.inc()
                self._read(event.message)
                log.warning("reading.undecodable", topic=event.message.topic, partition=event.message.partition,
                            offset=event.message.offset, reason=value.reason)  # fmt: skip
                continue
            self._read(event.message)
            reading = Reading.from_record(value, event.message.partition, event.message.offset)
            await self.on_reading(reading)

    async def _when_registry_answers(self, waiting: AwaitingRegistry, message: Any) -> Any:
        """The value decoded once the registry gives its writer schema. The readings behind it
        wait (in order), and faust acknowledges none of them before it is applied."""
        backoff = Backoff(*REGISTRY_BACKOFF_S)
        value: Any = waiting
        while isinstance(value, AwaitingRegistry):
            metrics.REGISTRY_WAITS.inc()
            delay = backoff.next_delay()
            log.warning("reading.registry_unreachable", topic=message.topic, partition=message.partition,
                        offset=message.offset, reason=value.reason, retry_in_s=round(delay, 3))  # fmt: skip
            await asyncio.sleep(delay)
            # In a thread: a registry that does not answer must not stop the event loop (heartbeats, the web API).
            value = await asyncio.to_thread(value.again)
        return value

    def _read(self, message: Any) -> None:
        partition, offset = message.partition, message.offset
        sent_ms = int(message.timestamp * 1000)
        self.newest_sent[partition] = max(self.newest_sent.get(partition, 0), sent_ms)
        if partition not in self.read or offset > self.read[partition]:
            if partition not in self.resumed:
                self.resumed.add(partition)
                log.info("partition.resumed", topic=self.settings.input_topic, partition=partition, offset=offset)
            self.read[partition] = offset

    async def on_reading(self, reading: Reading) -> None:
        key = reading.device_id.encode()
        state = self._state(key)
        if is_replay(state, reading):
            metrics.REPLAYS.inc()
            return
        new, turned = apply_reading(state, reading, self.clock())
        self.table[key] = pack(new)
        if state is not None and state["partition"] != new["partition"]:
            self.deadlines.forget(key, state["partition"])  # the input was repartitioned
        self.deadlines.track(key, new)
        metrics.READINGS.inc()
        if turned is not None:
            await self._emit(new, state["status"] if state else None)

    async def _decide_silence(self, stream: Any) -> None:
        async for event in stream.events():
            state = self._state(event.key)
            watch_start = self.watch_start.get(event.message.partition)
            if state is None or watch_start is None:
                continue
            # Decided as of the tick that saw the silence; a reading processed since then
            # counts as heard later, so the device stays ONLINE.
            checked_at = int(event.value["checked_at_ms"])
            if is_silent(state, checked_at, self.threshold_ms, watch_start):
                offline = mark_offline(state, checked_at)
                self.table[event.key] = pack(offline)
                self.deadlines.track(event.key, offline)
                await self._emit(offline, state["status"])
            else:  # heard since the check was sent: due again from what the table says now
                self.deadlines.track(event.key, state)

    async def _emit(self, state: State, previous: Status | None) -> None:
        await self.status.send(key=state["device_id"], value=transition_record(state, previous, self.threshold_ms))
        metrics.TRANSITIONS.labels(state["status"]).inc()
        self.transitions[state["status"]] += 1
        # One line per device at DEBUG only: a fleet starting up, or coming back after an outage,
        # turns every device at once, and the status topic is the record of each. The tick logs
        # how many turned (``_log_transitions``).
        log.debug("device.transition", device_id=state["device_id"], status=state["status"], previous=previous,
                 partition=state["partition"], offset=state["offset"])  # fmt: skip

    def active_partitions(self) -> set[int]:
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == self.settings.input_topic}

    def standby_partitions(self) -> set[int]:
        """The partitions this instance keeps a copy of for another (``standby_replicas``): their
        entries are in the table's memory, kept current from the changelog, judged by nobody here."""
        topics = {self.settings.input_topic, self.table.changelog_topic.get_topic_name()}
        return {tp.partition for tp in self.app.assignor.assigned_standbys() if tp.topic in topics}

    def partitions(self) -> dict[str, Any]:
        """Which partitions this instance owns and which it stands by for, with the entries held."""
        held: dict[int, int] = {}
        for state in self._states():
            held[state["partition"]] = held.get(state["partition"], 0) + 1
        active, standby = self.active_partitions(), self.standby_partitions()
        return {
            "active": sorted(active),
            "standby": sorted(standby),
            "devices": {"active": sum(held.get(p, 0) for p in active), "standby": sum(held.get(p, 0) for p in standby)},
        }

    def settled(self) -> bool:
        """Assigned and restored: not rebalancing, not replaying a changelog."""
        return (
            self.restored
            and not getattr(self.app, "rebalancing", False)
            and not getattr(self.app, "in_recovery", False)
        )

    async def _tick(self) -> None:
        self._log_transitions()
        if not self.settled():
            return
        now = self.clock()  # before asking where the input ends: what was sent by now lies before it
        active = self.active_partitions()
        ends = await self._input_ends(active)
        self._show_lag(active, ends)
        self._start_watching(active, ends, now)
        as_of = {p: self._judged_as_of(p, ends, now) for p in active}
        metrics.JUDGED_LATE.set(sum(1 for at in as_of.values() if at != now))
        self.deadlines.retain(active)
        for partition, at in as_of.items():
            watch_start = self.watch_start.get(partition)
            # Silence counts from no earlier than the watch's start: before that plus the
            # threshold nobody on the partition can be silent.
            if at is not None and watch_start is not None and watch_start + self.threshold_ms <= at:
                await self._check_due(partition, at, watch_start)
        for status, count in self.deadlines.counts(active).items():
            metrics.DEVICES.labels(status).set(count)

    def _log_transitions(self) -> None:
        """How many devices turned ONLINE and OFFLINE since the last tick, in one line."""
        if self.transitions:
            log.info("devices.transitions", **{status.lower(): n for status, n in sorted(self.transitions.items())})
            self.transitions.clear()

    async def _check_due(self, partition: int, at: int, watch_start: int) -> None:
        """Ask for a silence check of each device silent as of ``at``. The index only says which
        devices to read: each is judged on the table's entry, which is indexed again. One found
        silent stays due, so every tick asks again until the check has turned it OFFLINE."""
        for key in self.deadlines.due(partition, at):
            state = self._state(key)
            if state is None:
                self.deadlines.forget(key, partition)
                continue
            self.deadlines.track(key, state)
            if is_silent(state, at, self.threshold_ms, watch_start):
                if not await self._ask_check(key, at, partition):
                    return
                metrics.CHECKS.inc()

    async def _ask_check(self, key: bytes, at: int, partition: int) -> bool:
        """Send one silence check; False when the worker is stopping and its producer is gone.
        faust stops the producer before the timer's last tick ends, and a tick's error crashes
        the worker (exit 1, so a SIGTERM looks like a failure). The device stays due: the
        partition's next owner indexes it again from the table and asks."""
        try:
            await self.checks.send(key=key, value={"checked_at_ms": at}, partition=partition)
        except NotReady:
            if not self.app.should_stop:
                raise
            log.info("silence_checks.left_to_next_owner", partition=partition, reason="stopping")
            return False
        return True

    def _show_lag(self, active: set[int], ends: dict[int, int]) -> None:
        """The lag of each owned partition whose end Kafka just gave; a partition no longer
        owned stops being shown (its new owner shows it)."""
        topic = self.settings.input_topic
        for partition in self.lag_shown - active:
            metrics.CONSUMER_LAG.remove(topic, str(partition))
        self.lag_shown &= active
        for partition, end in ends.items():
            metrics.CONSUMER_LAG.labels(topic, str(partition)).set(max(0, end - self.read.get(partition, -1) - 1))
            self.lag_shown.add(partition)

    async def _input_ends(self, active: set[int]) -> dict[int, int]:
        """Where each owned input partition ends now; empty when Kafka does not answer (then
        nothing is judged this tick: readings may be waiting that nobody can see)."""
        if not active:
            return {}
        try:
            return await self.end_offsets.ends(self.settings.input_topic, sorted(active))
        except ConsumeError as exc:
            log.warning("input.end_offsets_unknown", partitions=sorted(active), error=str(exc))
            return {}

    def _start_watching(self, active: set[int], ends: dict[int, int], now: int) -> None:
        """Watch a partition from the first tick at which it has caught up with the end its
        input had at the first tick after the restore (a busy input's later ends keep moving)."""
        for partition in active & set(ends):
            self.restore_ends.setdefault(partition, ends[partition])
        for partition in (active & set(self.restore_ends)) - set(self.watch_start):
            progress = CatchUp(end=self.restore_ends[partition], read=self.read.get(partition, -1))
            if caught_up(progress):
                self.watch_start[partition] = now
                log.info("partition.watching", partition=partition, input_end=progress.end, read=progress.read)

    def _judged_as_of(self, partition: int, ends: dict[int, int], now: int) -> int | None:
        """The time as of which ``partition``'s silences can be judged: now when every reading
        sent by now has been processed; else the send time of the newest one processed (a
        stalled consumer must not take the readings it has yet to process for silence); None
        when the end is unknown or nothing was processed yet."""
        if partition not in ends:
            return None
        if caught_up(CatchUp(end=ends[partition], read=self.read.get(partition, -1))):
            return now
        return self.newest_sent.get(partition)

    def get(self, device_id: str) -> State | None:
        return self._state(device_id.encode())

    def local_devices(self) -> list[State]:
        active = self.active_partitions()
        return [state for state in self._states() if state["partition"] in active]
