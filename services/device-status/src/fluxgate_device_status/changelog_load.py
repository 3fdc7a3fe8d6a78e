"""The table's changelog read in bulk, before faust's recovery reads the rest.

faust's recovery handles one record at a time (a task per record, the conductor's dispatch, the
codecs): about 80 µs of CPU each, 24.5 CPU-s for 300,000 devices at start. Read in batches by
one librdkafka consumer and applied here, about 7 µs each
(bench/results/2026-11-30-device-status-bulk-restore.md). The store (``store.py``) applies what
this reads and says as persisted the last offset it applied, so faust reads only the tail:
what was written after the load.

Group-less (assigned, never subscribed, nothing committed), with the service's own Kafka
settings: SASL and TLS as the rest of the service has them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, NamedTuple, cast

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from faust.types import TP

from fluxgate_core.consumer import capped_prefetch
from fluxgate_core.settings import KafkaSettings

log = structlog.get_logger(__name__)
CHUNK = 10_000  # records a call hands over: what the event loop applies between two awaits
# How long a call waits for a whole chunk. librdkafka's batch call waits for the count or the
# timeout: at 1 s, 300,000 records took 2.4 to 3.4 s to read, at 0.1 s 1.75 s (0.7 CPU-s either way).
WAIT_S = 0.1
# librdkafka's default prefetch (64 MiB of payload) raised the process's peak by 83 MiB over
# faust's own restore at 300,000 devices; at 4 MiB, with capped_prefetch's short backoff, by
# 16 to 35 MiB, and the load was no slower (bench/results/2026-11-30-device-status-bulk-restore.md).
PREFETCH_KBYTES = 4096


class Loaded(NamedTuple):
    """One changelog record: a value of None is a tombstone (the key was deleted)."""

    tp: TP
    offset: int
    key: bytes
    value: bytes | None


class LoadStalled(Exception):
    """Kafka gave nothing for ``stall_s`` with partitions left to read."""


class ChangelogLoader:
    """Reads changelog partitions from given offsets to their ends."""

    def __init__(
        self, kafka: KafkaSettings, default_client_id: str, min_records: int = 0, stall_s: float = 30.0
    ) -> None:
        self._config: dict[str, Any] = {
            **capped_prefetch(PREFETCH_KBYTES),  # the kafka extra properties win when they set it
            **kafka.assigned_consumer_config(default_client_id, "changelog-load"),
            "enable.partition.eof": True,  # the end of each partition, said once reached
            "auto.offset.reset": "earliest",  # a start compaction removed: from what is left
        }
        self._min_records, self._stall_s = min_records, stall_s

    async def load(self, starts: Mapping[TP, int], go_on: Callable[[], bool]) -> AsyncIterator[list[Loaded]]:
        """Chunks of the records at or after ``starts[tp]`` in each partition, up to its end;
        stops early, between chunks, once ``go_on()`` is false; nothing if fewer than
        ``min_records`` are there to read. The consumer waits in a thread, so the event loop
        stays free for faust's web views and timers meanwhile."""
        consumer = await asyncio.to_thread(Consumer, self._config)
        try:
            remaining = await asyncio.to_thread(_assign, consumer, starts, self._min_records)
            stalled_since = time.monotonic()
            while remaining and go_on():
                chunk = await asyncio.to_thread(_next_chunk, consumer, remaining)
                if chunk:
                    stalled_since = time.monotonic()
                    yield chunk
                elif time.monotonic() - stalled_since > self._stall_s:
                    raise LoadStalled(f"nothing read for {self._stall_s:.0f} s from {sorted(remaining)}")
        finally:
            await asyncio.to_thread(consumer.close)


def _assign(consumer: Consumer, starts: Mapping[TP, int], min_records: int) -> set[TP]:
    """Assign each partition with something at or after its start, if they hold ``min_records``
    or more together; the partitions assigned."""
    owed: dict[TP, int] = {}
    for tp, start in starts.items():
        _, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
        if start < high:  # a start past the end (a topic made anew) is faust's to handle
            owed[tp] = high - start
    if sum(owed.values()) < min_records:
        if owed:  # said once per rebalance, where the load would otherwise have said what it read
            log.info("table.load_left_to_faust", records=sum(owed.values()), min_records=min_records)
        return set()
    consumer.assign([TopicPartition(tp.topic, tp.partition, starts[tp]) for tp in owed])
    return set(owed)


def _next_chunk(consumer: Consumer, remaining: set[TP]) -> list[Loaded]:
    """Up to ``CHUNK`` records; a partition whose end was reached leaves ``remaining``."""
    chunk: list[Loaded] = []
    for message in consumer.consume(CHUNK, timeout=WAIT_S):
        error, topic = message.error(), message.topic()
        if topic is None:  # the client's own notice, no partition's
            # librdkafka retries what is not fatal. Under least privilege it is told, again and
            # again, that its group is refused: it asks for a coordinator it never uses.
            if error is not None and error.fatal():
                raise KafkaException(error)
            continue
        tp = TP(topic, cast(int, message.partition()))
        if error is None:
            # Past the end (EOF was said): faust's recovery reads it. No key: no table entry.
            if tp in remaining and (key := message.key()) is not None:
                chunk.append(Loaded(tp, cast(int, message.offset()), key, message.value()))
        elif error.code() == KafkaError._PARTITION_EOF:
            remaining.discard(tp)
            consumer.incremental_unassign([TopicPartition(tp.topic, tp.partition)])
        elif error.fatal() or not error.retriable():
            raise KafkaException(error)  # the partition's: faust's recovery reads it instead
    return chunk
