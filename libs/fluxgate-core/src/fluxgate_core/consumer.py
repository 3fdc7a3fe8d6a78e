"""A Kafka consumer that never skips a record and commits only what the caller handled.

Rebalance callbacks (``on_assign``, ``on_revoke``; a lost assignment counts as revoked)
run inside :meth:`RecordConsumer.poll_batch`, on the caller's thread, with
``(topic, partition)`` pairs. Not thread-safe: one thread polls, seeks and commits.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from fluxgate_core.consumed_record import ConsumedRecord, Decoder, PartitionKey, RecordHeaders
from fluxgate_core.errors import CommitError, ConsumeError, FluxgateError
from fluxgate_core.kafka_errors import commit_error, config_error, converted

PartitionsCallback = Callable[[list[PartitionKey]], None]
log = structlog.get_logger(__name__)
# More fences than this within the window: another live consumer has our group.instance.id.
FENCES_ALLOWED = 3
FENCE_WINDOW_S = 600.0
__all__ = ["Decoder", "PartitionKey", "PartitionsCallback", "RecordConsumer", "RecordHeaders", "capped_prefetch"]
# librdkafka fetches for a partition whose prefetch queue was full again only after
# fetch.queue.backoff.ms, 1 s by default: a consumer capped at 4 MiB then read ~24,000 records/s
# of 256 B, ~6,000 of 2 KB and ~2,300 of 20 KB, against ~447,000, ~207,000 and ~40,000 at
# 10 ms (bench/prefetch.py, bench/results/2026-11-28-prefetch-backoff.md). Only a small cap
# needs it: at its own 64 MiB the queue rarely fills.
FULL_QUEUE_BACKOFF_MS = 10


def capped_prefetch(kbytes: int) -> dict[str, int]:
    """librdkafka properties that cap a consumer's prefetch at ``kbytes`` of record payload
    (queued.max.messages.kbytes, for the whole consumer) without stalling it at the cap."""
    return {"queued.max.messages.kbytes": kbytes, "fetch.queue.backoff.ms": FULL_QUEUE_BACKOFF_MS}


class RecordConsumer:
    """Subscribes to ``topics``, hands out decoded batches, commits only what it is told.

    A value that does not decode for good comes back with ``error`` set instead of raising,
    so one poison record never stops a batch: the caller dead-letters it and moves on.
    Paused partitions are resumed by Kafka on a new assignment: pause again in ``on_assign``.
    A static member fenced by Kafka is replaced by a new consumer (see :meth:`_rejoin`).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        topics: Sequence[str],
        decoder: Decoder | None = None,
        *,
        on_assign: PartitionsCallback | None = None,
        on_revoke: PartitionsCallback | None = None,
    ) -> None:
        self._decoder = decoder
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._incremental = _incremental(config)
        self._instance_id = config.get("group.instance.id")
        self._returned: dict[PartitionKey, deque[int]] = {}  # returned, not yet committed, in order
        self._assigning: dict[PartitionKey, TopicPartition] | None = None  # set inside on_assign
        self._deferred: ConsumeError | None = None
        self._missing_since: dict[str, float] = {}  # topic -> when it was last said to be missing
        self._fenced_at: deque[float] = deque()
        self._handed: set[PartitionKey] = set()  # given to on_assign and not revoked since
        self._closed = False
        self._config = {"error_cb": _client_error, **config}
        self._topics = list(topics)
        self._consumer = self._connect()

    def _connect(self) -> Consumer:
        try:
            consumer = Consumer(self._config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise config_error(exc, "consumer") from exc
        try:
            consumer.subscribe(self._topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost)
        except (KafkaException, ValueError) as exc:
            raise converted(exc, ConsumeError, f"cannot subscribe to {self._topics}") from exc
        return consumer

    def poll_batch(self, max_records: int = 500, timeout: float = 1.0) -> list[ConsumedRecord]:
        """Up to ``max_records`` records, waiting at most ``timeout`` s for the first.

        Never skips a record. When a value cannot be decoded for a retriable reason (the
        registry is away) or Kafka reports an error for a partition, the records before it
        are returned and every partition is sought back to its first record not returned,
        so the next call reads it again. With nothing before it, the error is raised (a
        partition error that came after some records is raised by the next call).
        """
        if self._deferred is not None:
            deferred, self._deferred = self._deferred, None
            raise deferred
        messages = self._consume(max_records, timeout)
        records: list[ConsumedRecord] = []
        for index, msg in enumerate(messages):
            error: KafkaError | None = msg.error()
            if error is not None:
                code = error.code()
                if code == KafkaError._PARTITION_EOF:  # an event, not a record (enable.partition.eof)
                    continue
                if code in _NOT_THERE:
                    self._missing_topic(msg)
                    continue
                if code == KafkaError._FATAL:  # nothing of this batch was handed out: all of it comes again
                    self._rejoin(error)
                    return []
            try:
                records.append(self._record(msg))
            except Exception as exc:
                self._rewind(messages[index:])
                if not records:
                    raise
                if isinstance(exc, ConsumeError):  # an event, not a record: nothing reads it again
                    self._deferred = exc
                break
        for item in records:
            self._returned.setdefault((item.topic, item.partition), deque()).append(item.offset)
        return records

    def commit(self, records: Iterable[ConsumedRecord]) -> None:
        """Commit ``records`` synchronously (past the last of them in each partition).

        In each partition they must be exactly the oldest records returned and not yet
        committed (any order): a gap would commit past a record nobody handled, so it is a
        ``ValueError``. :class:`CommitError` as for :meth:`commit_offsets`.
        """
        by_partition: dict[PartitionKey, list[int]] = {}
        for item in records:
            by_partition.setdefault((item.topic, item.partition), []).append(item.offset)
        if not by_partition:
            return
        self._check_held(by_partition)
        ends = {part: self._checked_end(part, sorted(offsets)) for part, offsets in by_partition.items()}
        self.commit_offsets(ends)

    def commit_offsets(self, offsets: Mapping[PartitionKey, int]) -> None:
        """Commit synchronously; each value is the next offset to read in that partition.

        Raises :class:`CommitError` with ``rebalanced=True`` when a partition is not this
        consumer's any more (Kafka would accept that commit and overwrite its new owner's),
        and with Kafka's ``retriable`` flag for anything else.
        """
        if not offsets:
            return
        self._check_held(offsets)
        wanted = [TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
        try:
            results = self._consumer.commit(offsets=wanted, asynchronous=False)
        except (KafkaException, RuntimeError) as exc:
            raise commit_error(exc) from exc
        for result in results or ():
            if result.error is not None:
                raise commit_error(KafkaException(result.error))
        for part, offset in offsets.items():
            pending = self._returned.get(part, deque())
            while pending and pending[0] < offset:
                pending.popleft()

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read ``topic/partition`` from ``offset`` next (a logical offset such as
        ``OFFSET_BEGINNING`` too). Inside ``on_assign`` it sets where the assignment starts."""
        part = (topic, partition)
        pending = self._returned.get(part)
        while pending and pending[-1] >= offset:  # those come again: they are not committable now
            pending.pop()
        if self._assigning is not None and part in self._assigning:
            self._assigning[part] = TopicPartition(topic, partition, offset)
            return
        try:
            self._consumer.seek(TopicPartition(topic, partition, offset))
        except (KafkaException, RuntimeError) as exc:
            raise converted(exc, ConsumeError, f"cannot seek {topic}/{partition} to {offset}") from exc

    def seek_to_beginning(self, partitions: Iterable[PartitionKey]) -> None:
        """Read ``partitions`` from their first record (a replay); works inside ``on_assign``."""
        for topic, partition in partitions:
            self.seek(topic, partition, OFFSET_BEGINNING)

    def pause(self, partitions: Iterable[PartitionKey]) -> None:
        """Stop fetching ``partitions`` (records already returned are unaffected)."""
        self._pause_or_resume(self._consumer.pause, partitions, "pause")

    def resume(self, partitions: Iterable[PartitionKey]) -> None:
        """Fetch paused ``partitions`` again, from where they were."""
        self._pause_or_resume(self._consumer.resume, partitions, "resume")

    def high_watermark(self, topic: str, partition: int) -> int | None:
        """The partition's end offset as of the last fetch (no request to Kafka); None before one."""
        try:
            _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        except (KafkaException, RuntimeError):
            return None
        return int(high) if high >= 0 else None

    def assignment(self) -> list[PartitionKey]:
        """The partitions this consumer holds now."""
        if self._closed:
            return []
        try:
            return [(tp.topic, tp.partition) for tp in self._consumer.assignment()]
        except (KafkaException, RuntimeError) as exc:
            raise converted(exc, ConsumeError, "cannot read the assignment") from exc

    def close(self) -> None:
        """Leave the group (partitions move to the other members at once). Safe to call twice.

        A static member (``group.instance.id``) does not leave: librdkafka sends no LeaveGroup
        for one (KIP-345), so its partitions wait for it until ``session.timeout.ms``."""
        if not self._closed:
            self._closed = True
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError) as exc:  # leaving is best effort; the session times out
                log.warning("kafka.consumer.close_failed", error=str(exc))
            if self._instance_id:  # an operator waiting for a rebalance learns why none comes
                log.info(
                    "kafka.consumer.static_member_kept",
                    group_instance_id=self._instance_id,
                    until="it restarts or session.timeout.ms passes",
                )

    def _consume(self, max_records: int, timeout: float) -> list[Message]:
        try:
            return self._consumer.consume(max_records, timeout)
        except (KafkaException, RuntimeError) as exc:
            raise converted(exc, ConsumeError, "consuming failed") from exc

    def _record(self, msg: Message) -> ConsumedRecord:
        error = msg.error()
        if error is not None:
            where = f"{msg.topic()}/{msg.partition()}"
            raise ConsumeError(f"consuming {where} failed: {error.str()}", retriable=error.retriable())
        value = msg.value() or b""
        record, failure = self._decode(value)
        # Positional: keywords cost a named tuple twice as much, once per record.
        return ConsumedRecord(
            msg.topic() or "",  # topic
            msg.partition() or 0,  # partition
            msg.offset() or 0,  # offset
            msg.key(),  # key
            value,
            tuple(msg.headers() or ()),  # type: ignore[arg-type]  # headers
            msg.timestamp()[1],  # timestamp_ms
            record,
            failure,  # error
        )

    def _decode(self, value: bytes) -> tuple[dict[str, Any] | None, FluxgateError | None]:
        if self._decoder is None:
            return None, None
        try:
            return self._decoder.decode(value), None
        except FluxgateError as exc:
            if exc.retriable:  # the registry is away: the record is fine, read it again later
                raise
            return None, exc

    def _rejoin(self, error: KafkaError) -> None:
        """Replace a consumer librdkafka declared dead, or raise if that keeps happening.

        The only fatal consumer error is a static member (``group.instance.id``) fenced
        (KIP-345). A consumer fences itself when its session ends while Kafka is unreachable
        or paused: its rejoin races the broker's expiry of the old member (librdkafka #3437;
        two persisters stopped for good after a 60 s pause of Kafka in a soak run). A new
        consumer with the same id takes the membership back; its partitions start again
        from the last commit, as after a lost assignment. Fenced again and again, another
        live consumer has the same id, and each rejoin would fence it in turn.
        """
        now = time.monotonic()
        self._fenced_at.append(now)
        while now - self._fenced_at[0] > FENCE_WINDOW_S:
            self._fenced_at.popleft()
        log.warning("kafka.consumer.fenced", group_instance_id=self._instance_id, reason=error.str(),
                    times=len(self._fenced_at), within_s=FENCE_WINDOW_S)  # fmt: skip
        if len(self._fenced_at) > FENCES_ALLOWED:
            raise ConsumeError(
                f"group.instance.id {self._instance_id!r} was fenced {len(self._fenced_at)} times in "
                f"{FENCE_WINDOW_S:.0f} s: another consumer of group {self._config.get('group.id')!r} "
                "runs with the same group.instance.id (each instance needs its own)",
                retriable=False,
            )
        if self._handed:  # librdkafka drops them without a callback; the caller must not commit them
            self._revoked(self._consumer, [TopicPartition(topic, partition) for topic, partition in self._handed])
        self._returned.clear()
        with contextlib.suppress(KafkaException, RuntimeError):  # a dead handle: nothing to leave
            self._consumer.close()
        self._consumer = self._connect()

    def _missing_topic(self, msg: Message, every: float = 30.0) -> None:
        """Say, at most every ``every`` seconds per topic, that a subscribed topic is not there;
        not an error to raise: the consumer gets its records once the topic exists."""
        topic, now = msg.topic() or "?", time.monotonic()
        if now - self._missing_since.get(topic, -every) >= every:
            self._missing_since[topic] = now
            error = msg.error()
            log.warning("kafka.consumer.topic_missing", topic=topic, reason=error.str() if error else "unknown topic")

    def _rewind(self, messages: Sequence[Message]) -> None:
        """Seek every partition of ``messages`` (the rest of a batch) back to its first one there."""
        firsts: dict[PartitionKey, int] = {}
        for msg in messages:
            if msg.error() is None:
                firsts.setdefault((msg.topic() or "", msg.partition() or 0), msg.offset() or 0)
        for (topic, partition), offset in firsts.items():
            self.seek(topic, partition, offset)
        if firsts:
            log.info("kafka.consumer.rewound", partitions={f"{t}/{p}": o for (t, p), o in firsts.items()})

    def _check_held(self, partitions: Iterable[PartitionKey]) -> None:
        if self._closed:
            raise CommitError("commit failed: the consumer is closed", rebalanced=True)
        foreign = sorted(set(partitions) - set(self.assignment()))
        if foreign:
            names = ", ".join(f"{topic}/{partition}" for topic, partition in foreign)
            raise CommitError(f"commit failed, not assigned to this consumer: {names}", rebalanced=True)

    def _checked_end(self, part: PartitionKey, offsets: list[int]) -> int:
        oldest = list(itertools.islice(self._returned.get(part, ()), len(offsets)))
        if offsets != oldest:
            raise ValueError(
                f"{part[0]}/{part[1]}: offsets {offsets[:5]}... are not the oldest uncommitted records "
                f"returned ({oldest[:5]}...): committing them would skip records"
            )
        return offsets[-1] + 1

    def _pause_or_resume(
        self, action: Callable[[list[TopicPartition]], None], partitions: Iterable[PartitionKey], what: str
    ) -> None:
        try:
            action([TopicPartition(topic, partition) for topic, partition in partitions])
        except (KafkaException, RuntimeError) as exc:
            raise converted(exc, ConsumeError, f"cannot {what} partitions") from exc

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigning = {(tp.topic, tp.partition): tp for tp in partitions}
        try:
            if self._on_assign is not None:
                self._on_assign(list(self._assigning))
        finally:
            # Assigning here (not letting confluent-kafka do it after us) is what makes
            # a seek inside on_assign take effect: the offsets travel with the assignment.
            chosen, self._assigning = list(self._assigning.values()), None
            self._handed.update((tp.topic, tp.partition) for tp in chosen)
            if self._incremental:
                consumer.incremental_assign(chosen)
            else:
                consumer.assign(chosen)
            # A partition handed to on_assign is fetched. librdkafka keeps a pause through an
            # eager rebalance that gives the partition back to the same member, while the
            # caller starts it afresh: nothing would ever resume it (two sinks stalled so).
            # A partition kept through a cooperative rebalance is not handed over: its pause stays.
            if chosen:
                consumer.resume(chosen)
        log.info("kafka.consumer.assigned", partitions=[f"{tp.topic}/{tp.partition}" for tp in chosen])

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        parts = [(tp.topic, tp.partition) for tp in partitions]
        try:
            if self._on_revoke is not None:
                self._on_revoke(parts)
        finally:
            for part in parts:  # their records go to the new owner from the last commit
                self._returned.pop(part, None)
                self._handed.discard(part)
        log.info("kafka.consumer.revoked", partitions=[f"{t}/{p}" for t, p in parts])

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.warning("kafka.consumer.lost", partitions=[f"{tp.topic}/{tp.partition}" for tp in partitions])
        self._revoked(consumer, partitions)


# A subscribed topic the broker does not know (yet): librdkafka keeps asking for it, and
# right after a broker restart a topic created a moment ago can be unknown for a while.
_NOT_THERE = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})


def _incremental(config: Mapping[str, Any]) -> bool:
    """Cooperative assignors and KIP-848's protocol hand out partitions incrementally."""
    strategy = str(config.get("partition.assignment.strategy", ""))
    return "cooperative" in strategy or str(config.get("group.protocol", "")) == "consumer"


def _client_error(err: KafkaError) -> None:
    """Client-wide errors (brokers away...): librdkafka retries them itself; without this
    callback they would arrive as records' errors from ``consume``."""
    log.warning("kafka.consumer.client_error", code=err.name(), reason=err.str(), fatal=err.fatal())
