"""Reads the dead-letter topics into a :class:`DeadLetterBook`, in a thread of its own.

No consumer group: every console reads every partition itself, from ``lookback`` records
before the end, and commits nothing (it only looks). Topics that do not exist yet are
looked for again every ``rescan_s``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from fluxgate_console.deadletters import DeadLetter, DeadLetterBook
from fluxgate_core.consumer import capped_prefetch

log = structlog.get_logger(__name__)

# librdkafka prefetches up to 64 MiB of payload by default (queued.max.messages.kbytes), all of
# it in the console's memory while it reads a backlog of dead letters it keeps only 500 of per
# topic. Catching up on 9,000 dead letters of 20 KB (3 partitions), the reader grew 70 to 103 MiB
# with librdkafka's defaults and 43 to 46 MiB at 4 MiB, in 0.3 and 0.5 s (8 to 12 s without the
# short backoff capped_prefetch adds). The kafka extra properties win when they set either.
PREFETCH = capped_prefetch(4096)


def letter_of(message: Message) -> DeadLetter:
    timestamp = message.timestamp()[1]
    return DeadLetter(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        timestamp_ms=int(timestamp) if timestamp and timestamp > 0 else int(time.time() * 1000),
        key=_bytes(message.key()),
        value=_bytes(message.value()) or b"",
        headers=tuple((str(name), _bytes(value)) for name, value in _header_list(message)),
    )


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _header_list(message: Message) -> list[tuple[str, str | bytes | None]]:
    headers = message.headers() or []
    return list(headers.items()) if isinstance(headers, dict) else list(headers)


class DeadLetterReader:
    """``start()``/``stop()``; ``error`` and ``read_at`` say how the reading goes."""

    def __init__(
        self, config: dict[str, Any], book: DeadLetterBook, lookback: int, timeout_s: float, rescan_s: float = 10.0
    ) -> None:
        self._config = {**PREFETCH, **config, "enable.auto.commit": False, "enable.partition.eof": False}
        self._book = book
        self._lookback = lookback
        self._timeout = timeout_s
        self._rescan_s = rescan_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._assigned: set[tuple[str, int]] = set()
        self._read_error: str | None = None  # the last read's
        self._scan_error: str | None = None  # the last scan's: kept until the next scan
        self.read_at: float | None = None  # when Kafka last answered a poll or a scan

    @property
    def error(self) -> str | None:
        """What goes wrong now: a failed read, else what the last scan found missing (a read
        that went well must not hide a topic that does not exist yet)."""
        return self._read_error or self._scan_error

    def start(self) -> DeadLetterReader:
        self._thread = threading.Thread(target=self._run, name="deadletter-reader", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _run(self) -> None:
        consumer = Consumer(self._config)
        try:
            next_scan = 0.0
            while not self._stop.is_set():
                if time.monotonic() >= next_scan:
                    self._scan(consumer)
                    next_scan = time.monotonic() + self._rescan_s
                if not self._assigned:
                    self._stop.wait(1.0)
                    continue
                self._read(consumer)
        finally:
            consumer.close()

    def _read(self, consumer: Consumer) -> None:
        try:
            messages = consumer.consume(500, timeout=0.5)
        except KafkaException as exc:
            self._read_error = f"reading dead letters: {exc}"
            return
        letters = [letter_of(m) for m in messages if m.error() is None]
        errors = [m.error() for m in messages if m.error() is not None]
        self._read_error = f"reading dead letters: {errors[-1]}" if errors else None
        self.read_at = time.time()
        self._book.add(letters)

    def _scan(self, consumer: Consumer) -> None:
        """Assign partitions not assigned yet, from ``lookback`` before their end."""
        try:
            metadata = consumer.list_topics(timeout=self._timeout)
            new = [
                (topic, partition)
                for topic in self._book.topics()
                if topic in metadata.topics
                for partition in metadata.topics[topic].partitions
                if (topic, partition) not in self._assigned
            ]
            starts = []
            for topic, partition in new:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self._timeout)
                starts.append(TopicPartition(topic, partition, max(low, high - self._lookback)))
        except KafkaException as exc:
            self._scan_error = f"cannot list the dead-letter topics: {exc}"
            return
        if starts:
            consumer.incremental_assign(starts)
            self._assigned.update(new)
            log.info("deadletters.assigned", partitions=[f"{tp.topic}/{tp.partition}@{tp.offset}" for tp in starts])
        missing = [t for t in self._book.topics() if t not in metadata.topics]
        self._scan_error = f"no such topic yet: {', '.join(missing)}" if missing else None
        self.read_at = time.time()
