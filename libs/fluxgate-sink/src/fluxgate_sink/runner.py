"""The one loop every persister runs: poll, route, batch per partition, write, commit.

Offsets are committed only after a batch is written and its dead letters are confirmed
by Kafka, so a crash at any point repeats at most the batches in hand (idempotent
writes make that harmless) and never skips one. Batches of different partitions are
written concurrently; while a partition has a batch in hand and several waiting, the loop
waits for that write instead of polling, and pauses the partition's fetching only when the
store is away or the write takes long (``PAUSE_AFTER_S``); it keeps polling then, so the
group never loses us, even through a store outage of hours. The same applies to the process as
a whole: past ``max_held_records`` held in all, it writes what it holds, waits, then pauses
every partition until below, so memory does not grow with the partitions it is given.
Not built on faust-streaming: see the persisters' README.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from itertools import groupby
from operator import attrgetter
from typing import Any, Protocol

import structlog

from fluxgate_core.backoff import Backoff, sleep_unless
from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.consumer import capped_prefetch
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import FluxgateError, SettingRefused
from fluxgate_core.kafka import PartitionKey, RecordConsumer, ensure_topics, make_producer
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.registry_access import verify_registry
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_core.topic_watch import TopicWatch
from fluxgate_sink import metrics
from fluxgate_sink.formats import AvroKeys, header_reader, key_reader, value_decoder
from fluxgate_sink.kcql import parse
from fluxgate_sink.kcql_routing import Router
from fluxgate_sink.partitions import PAUSE_AFTER_S, PartitionState
from fluxgate_sink.settings import SinkSettings
from fluxgate_sink.sink import Sink
from fluxgate_sink.transforms import Transforms, value_reader
from fluxgate_sink.writer import Abandoned, BatchWriter, DeadLetters

log = structlog.get_logger(__name__)
Task = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
_partition_of: Callable[[ConsumedRecord], PartitionKey] = attrgetter("topic", "partition")
Rebalance = Callable[[list[PartitionKey]], None]


class Source(Protocol):
    """What the runner needs of :class:`fluxgate_core.kafka.RecordConsumer` (a fake in unit tests)."""

    def poll_batch(self, max_records: int = 500, timeout: float = 1.0) -> list[ConsumedRecord]: ...
    def commit_offsets(self, offsets: Mapping[PartitionKey, int]) -> None: ...
    def pause(self, partitions: Sequence[PartitionKey]) -> None: ...
    def resume(self, partitions: Sequence[PartitionKey]) -> None: ...
    def close(self) -> None: ...
    def high_watermark(self, topic: str, partition: int) -> int | None: ...


SourceFactory = Callable[[list[str], Rebalance, Rebalance], Source]


class SinkRunner:
    """Runs ``sink`` for the KCQL in ``settings`` until ``stop``; ``tasks`` run beside it (retention ...)."""

    def __init__(
        self,
        service: str,
        sink: Sink,
        *,
        kafka: KafkaSettings,
        registry: RegistrySettings,
        settings: SinkSettings,
        tasks: Sequence[Task] = (),
        source_factory: SourceFactory | None = None,
        dead_letters: DeadLetters | None = None,
        env_prefix: str = "FLUXGATE_*_",
    ) -> None:
        self._service = service
        self._env_prefix = env_prefix  # the service's: errors found at start name its variables
        self._sink = sink
        self._kafka = kafka
        self._registry = registry
        self._settings = settings
        self._tasks = tasks
        self._source_factory = source_factory or self._kafka_source
        self._dead_letters = dead_letters
        avro_keys = AvroKeys.of(registry) if settings.key_format == "avro" else None
        read_key = avro_keys.read if avro_keys else key_reader(settings.key_format, settings.key_schemas_enable)
        self._router = Router(
            parse(settings.kcql),
            sink.needs_ids,
            read_key,
            settings.document_ids(),
            settings.string_keys,
            sink.takes_tombstones,
            header_reader(settings.header_format, settings.header_schemas_enable),
        )
        # Their schemas are fetched before routing only where something reads the keys.
        reads_keys = self._router.reads_keys or settings.transforms or sink.reads_tombstone_keys
        self._avro_keys = avro_keys if avro_keys and reads_keys else None
        self._registry_wait = Backoff.capped(settings.outage_backoff_ms / 1000, settings.outage_max_backoff_ms / 1000)
        self._stop: asyncio.Event | None = None
        self._transforms = Transforms(
            settings.transforms, read_key, value_reader(settings.value_format, settings.value_schemas_enable)
        )
        self._partitions: dict[PartitionKey, PartitionState] = {}
        self._running = False
        self._store_up = True
        self._committed: dict[PartitionKey, int] = {}
        self._lag_shown = 0.0
        self._store_lost: asyncio.Future[None] | None = None  # set while waiting for room (see _wait_for_room)
        self._backlog = False  # the last poll was full: poll again without waiting (see _poll_here)
        self._over_since = 0.0  # since when the process holds max_held_records or more (0: it does not)
        self._watch: TopicWatch | None = None  # a topic deleted while running: not ready

    def ready(self) -> bool:
        """Ready while consuming and the store takes writes (503 through an outage: never 'running, no data')."""
        return self._running and self._store_up and (self._watch is None or self._watch.present())

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop``, then finish the batches in hand, commit them and return."""
        self._stop = stop
        if self._source_factory == self._kafka_source:  # a wrong password or a missing topic: say so now
            topics = dict.fromkeys(self._router.topics, "sink.kcql")
            await asyncio.to_thread(verify_kafka, self._kafka, self._service, self._env_prefix, topics)
            self._watch = TopicWatch(self._kafka, self._service, topics).start()
            if self._settings.value_format == "avro" or self._avro_keys:  # JSON topics need no registry
                # A refused secret or CA stops it now; a registry away is waited for while reading, as before.
                await asyncio.to_thread(verify_registry, self._registry, self._env_prefix, away_ok=True)
        try:
            await self._sink.setup(self._router.statements)
        except SettingRefused as exc:  # the sink knows the setting, the service its variable
            raise exc.named(self._env_prefix) from exc
        self._set_store_up(True)  # it answered the setup; before, the gauge read 0 (down) until a first write
        async with contextlib.AsyncExitStack() as resources:
            dead_letters = self._dead_letters or await self._open_dead_letters(resources)
            source = self._source_factory(self._router.topics, self._assigned, self._revoked)
            resources.callback(source.close)
            resources.push_async_callback(self._sink.close)
            writer = BatchWriter(self._sink, dead_letters, self._settings, stop, self._set_store_up)
            helpers = [asyncio.create_task(task(stop)) for task in self._tasks]
            try:
                await self._consume(source, writer, stop)
            finally:
                self._running = False
                if self._watch is not None:
                    self._watch.stop()
                for helper in helpers:
                    helper.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)

    async def _consume(self, source: Source, writer: BatchWriter, stop: asyncio.Event) -> None:
        self._running = True
        log.info("sink.started", sink=self._sink.name, topics=self._router.topics, policy=self._settings.error_policy)
        try:
            while not stop.is_set():
                if not await self._wait_for_room():
                    await self._poll(source, timeout=self._poll_timeout())
                await self._commit_written(source)
                now = time.monotonic()
                self._start_due(writer, now, squeezed=self._over_bound(now))
                self._pause_full(source, now)
                self._resume_room(source)
                self._show_lag(source)
            await self._drain(source, writer)
        except BaseException:
            await self._cancel_writes()  # a policy stop or a bug: commit nothing more
            raise

    def _poll_timeout(self) -> float:
        """How long a poll may wait for records: a poll cannot be woken when a write ends, and a
        finished write waits for the loop to come round (to commit, and start the next batch)."""
        if any(p.writing for p in self._partitions.values()):
            return 0.005
        return 0.05 if any(p.waiting for p in self._partitions.values()) else 0.5

    async def _poll(self, source: Source, timeout: float) -> None:
        limit = self._settings.poll_max_records
        try:
            if self._backlog:
                records = await self._poll_here(source, limit)
            else:
                records = await asyncio.to_thread(source.poll_batch, limit, timeout)
        except FluxgateError as exc:
            self._backlog = False
            if not exc.retriable:
                raise
            log.warning("sink.poll_failed", error=str(exc))  # registry or broker away: nothing was skipped
            await asyncio.sleep(1.0)
            return
        self._backlog = len(records) >= limit
        # By runs of one partition (what Kafka hands out), not record by record.
        for tp, run in groupby(records, _partition_of):
            partition = self._partitions.get(tp)
            if partition is not None:  # records of a partition revoked in the same poll are dropped
                partition.extend(run)

    async def _poll_here(self, source: Source, limit: int) -> list[ConsumedRecord]:
        """The last poll was full, so Kafka's queue likely holds more: take it on this thread,
        without waiting. A thread hand-off per poll, and the poll thread decoding while this
        one encodes (two threads taking turns on one GIL), cost the persister CPU per record
        that reading alone does not; nothing waits here, so the loop is held only while
        decoding. Then one turn of the loop, for the writes in flight."""
        records = source.poll_batch(limit, 0.0)
        await asyncio.sleep(0)
        return records

    def _over_bound(self, now: float) -> bool:
        """Whether the process holds ``max_held_records`` or more (and since when, in ``_over_since``)."""
        held = sum(partition.held for partition in self._partitions.values())
        metrics.HELD.set(held)
        if held < self._settings.max_held_records:
            self._over_since = 0.0
            return False
        self._over_since = self._over_since or now
        return True

    def _start_due(self, writer: BatchWriter, now: float, squeezed: bool = False) -> None:
        for partition in self._partitions.values():
            if partition.due(now, squeezed):
                records = partition.take()
                if self._avro_keys is None:
                    routed = self._router.route(self._transforms.apply(records))
                    partition.writing = asyncio.create_task(writer.write(routed))
                else:
                    partition.writing = asyncio.create_task(self._write_avro_keyed(writer, records))

    async def _write_avro_keyed(self, writer: BatchWriter, records: list[ConsumedRecord]) -> None:
        """Route and write records whose Avro keys are read: the keys' schemas first, on a thread, so
        routing never waits for the registry; a registry away is waited for, as a store away, and
        nothing is committed if the service stops meanwhile (the records are read again)."""
        if self._avro_keys is None or self._stop is None:  # not started through run(): nothing to fetch ahead
            await writer.write(self._router.route(self._transforms.apply(records)))
            return
        keys = [record.key for record in records]
        waits = 0
        while True:
            try:
                await asyncio.to_thread(self._avro_keys.fetch_schemas, keys)
                break
            except FluxgateError as exc:
                if waits == 0:
                    log.warning("sink.key_registry_unavailable", error=str(exc))
                if await sleep_unless(self._stop, self._registry_wait.delay(waits)):
                    raise Abandoned(f"stopping while the registry of the record keys is away: {exc}") from exc
                waits += 1
        await writer.write(self._router.route(self._transforms.apply(records)))

    async def _wait_for_room(self) -> bool:
        """Wait for the write of a full partition (not paused yet) instead of polling: a poll
        would bring more of its records and pause it (see ``PAUSE_AFTER_S``). False: poll."""
        since = [p.full_since for p in self._partitions.values() if p.full_since and not p.paused]
        if self._over_since and any(p.held and not p.paused for p in self._partitions.values()):
            since.append(self._over_since)
        if not since or not self._store_up:
            return False
        left = min(since) + PAUSE_AFTER_S - time.monotonic()
        if left <= 0:
            return False
        # Any write ending (its partition commits and starts its next batch) or the store going
        # away (the full partitions pause at once) ends the wait.
        self._store_lost = asyncio.get_running_loop().create_future()
        waits: list[asyncio.Future[None]] = [p.writing for p in self._partitions.values() if p.writing is not None]
        try:
            await asyncio.wait([*waits, self._store_lost], timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._store_lost.cancel()
            self._store_lost = None
        return True

    def _pause_full(self, source: Source, now: float) -> None:
        """Pause the partitions full for ``PAUSE_AFTER_S``, and every partition once the process
        has held too much for as long; at once while the store is away. Every one, not only
        those holding records: the others' records would come in at the next poll, and the
        next, past the bound by a poll each time."""
        full: list[PartitionState] = []
        for partition in self._partitions.values():
            partition.full_since = (partition.full_since or now) if partition.full else 0.0
            if partition.paused:
                continue
            if partition.full_since:
                since = partition.full_since
            elif self._over_since:
                since = self._over_since
            else:
                continue
            if now - since >= PAUSE_AFTER_S or not self._store_up:
                full.append(partition)
        if full:
            source.pause([p.tp for p in full])
            log.debug("sink.paused", partitions=[f"{t}/{n}" for t, n in (p.tp for p in full)])
            for partition in full:
                partition.paused = True

    async def _commit_written(self, source: Source) -> None:
        """Commit every partition whose batch is written; then raise what a failed write raised
        (PolicyStop, Abandoned or a bug), having committed nothing of that partition."""
        offsets: dict[PartitionKey, int] = {}
        failure: BaseException | None = None
        for partition in self._partitions.values():
            task = partition.writing
            if task is None or not task.done():
                continue
            partition.writing = None
            error = task.exception() if not task.cancelled() else asyncio.CancelledError()
            if isinstance(error, Abandoned):  # stopping with the store away: read again next time
                log.warning("sink.abandoned", partition=f"{partition.tp[0]}/{partition.tp[1]}", reason=str(error))
                continue
            if error is not None:
                failure = failure or error
                continue
            offsets[partition.tp] = partition.writing_end
        if offsets:
            await self._commit(source, offsets)
        if failure is not None:
            raise failure

    def _resume_room(self, source: Source) -> None:
        """Resume the paused partitions no longer full, once the store takes writes and the
        process holds less than its bound."""
        if not self._store_up or self._over_since:
            return
        resume = [p for p in self._partitions.values() if p.paused and not p.full]
        if resume:
            source.resume([p.tp for p in resume])
            log.debug("sink.resumed", partitions=[f"{t}/{n}" for t, n in (p.tp for p in resume)])
            for partition in resume:
                partition.paused = False

    async def _commit(self, source: Source, offsets: Mapping[PartitionKey, int]) -> None:
        try:
            await asyncio.to_thread(source.commit_offsets, offsets)
        except FluxgateError as exc:
            # A rebalance took the partition meanwhile: its new owner repeats the batch (idempotent).
            log.warning("sink.commit_failed", error=str(exc), offsets=_show(offsets))
            return
        metrics.COMMITTED.inc()
        self._committed.update(offsets)
        log.debug("sink.committed", offsets=_show(offsets))

    def _show_lag(self, source: Source, every: float = 2.0) -> None:
        """Consumer lag per partition: Kafka's end offset (as of the last fetch) minus our commit."""
        now = time.monotonic()
        if now - self._lag_shown < every:
            return
        self._lag_shown = now
        for tp in self._partitions:
            high, committed = source.high_watermark(*tp), self._committed.get(tp)
            if high is not None and committed is not None:
                metrics.LAG.labels(tp[0], str(tp[1])).set(max(0, high - committed))

    async def _drain(self, source: Source, writer: BatchWriter) -> None:
        """Stop: finish the batches in hand and what is waiting, commit, return."""
        log.info("sink.draining", batches=sum(1 for p in self._partitions.values() if p.writing))
        self._start_due(writer, float("inf"))
        pending = [p.writing for p in self._partitions.values() if p.writing is not None]
        if pending:
            await asyncio.wait(pending)
        await self._commit_written(source)
        log.info("sink.stopped")

    async def _cancel_writes(self) -> None:
        tasks = [p.writing for p in self._partitions.values() if p.writing is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for partition in self._partitions.values():
            partition.writing = None

    def _assigned(self, partitions: list[PartitionKey]) -> None:
        """Rebalance callback (inside poll): start empty state for each new partition."""
        for tp in partitions:
            size = self._router.batch_size(tp[0], self._settings.batch_size)
            self._partitions[tp] = PartitionState(tp, size, self._settings.batch_age_ms / 1000)
        log.info("sink.assigned", partitions=[f"{t}/{p}" for t, p in partitions])

    def _revoked(self, partitions: list[PartitionKey]) -> None:
        """Rebalance callback: what was held for a revoked partition is dropped, never committed."""
        for tp in partitions:
            self._committed.pop(tp, None)
            with contextlib.suppress(KeyError):  # another member reports its lag now
                metrics.LAG.remove(tp[0], str(tp[1]))
            partition = self._partitions.pop(tp, None)
            if partition is not None and partition.writing is not None:
                partition.writing.add_done_callback(_ignore_result)  # its result no longer commits anything
        log.info("sink.revoked", partitions=[f"{t}/{p}" for t, p in partitions])

    def _set_store_up(self, up: bool) -> None:
        self._store_up = up
        if not up and self._store_lost is not None and not self._store_lost.done():
            self._store_lost.set_result(None)
        metrics.STORE_UP.set(1 if up else 0)

    async def _open_dead_letters(self, resources: contextlib.AsyncExitStack) -> DeadLetters:
        admin = self._kafka.client_config(self._service)
        await asyncio.to_thread(ensure_topics, admin, {self._settings.deadletter_topic: 3})
        producer = make_producer(self._kafka.producer_config(self._service))
        await producer.start()
        resources.push_async_callback(producer.stop)
        return DeadLetterWriter(producer, self._settings.deadletter_topic, self._service)

    def _kafka_source(self, topics: list[str], on_assign: Rebalance, on_revoke: Rebalance) -> Source:
        group = self._settings.group_id or f"fluxgate-{self._service}"
        config = self._kafka.consumer_config(group, self._service)
        config = {**capped_prefetch(self._settings.prefetch_kbytes), **config}  # the extra properties win
        decoder = value_decoder(
            self._settings.value_format,
            self._settings.value_schemas_enable,
            self._registry,
            whole_text=self._sink.stores_whole_text,
        )
        replayed: set[PartitionKey] = set()

        def assigned(partitions: list[PartitionKey]) -> None:
            on_assign(partitions)
            fresh = [tp for tp in partitions if tp not in replayed]
            if self._settings.from_beginning and fresh:  # once per partition: a later rebalance resumes
                consumer.seek_to_beginning(fresh)
                replayed.update(fresh)
                log.info("sink.replaying", partitions=[f"{t}/{p}" for t, p in fresh])

        consumer = RecordConsumer(config, topics, decoder, on_assign=assigned, on_revoke=on_revoke)
        return consumer


def _ignore_result(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log "exception never retrieved"


def _show(offsets: Mapping[PartitionKey, int]) -> str:
    return ",".join(f"{t}/{p}@{o}" for (t, p), o in sorted(offsets.items()))
