"""The dead-letter reader's own account of how reading goes, against a fake consumer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fluxgate_console.deadletters import DeadLetterBook
from fluxgate_console.reader import DeadLetterReader
from fluxgate_console.settings import DeadLetterSettings


class FakeConsumer:
    """One dead-letter topic exists (one partition, empty), the other not yet."""

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={"sensors.deadletter": SimpleNamespace(partitions={0: None})})

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return 0, 0

    def incremental_assign(self, partitions: list[Any]) -> None:
        pass

    def consume(self, count: int, timeout: float) -> list[Any]:
        return []


def test_a_missing_topic_stays_reported_after_reads_that_went_well() -> None:
    book = DeadLetterBook(DeadLetterSettings(recent=10))
    reader = DeadLetterReader({"bootstrap.servers": "127.0.0.1:1"}, book, lookback=100, timeout_s=1)
    consumer: Any = FakeConsumer()
    reader._scan(consumer)
    reader._read(consumer)
    reader._read(consumer)
    assert reader.error == "no such topic yet: persisters.deadletter"


def test_the_reader_prefetches_a_few_mib_unless_the_kafka_extras_say_otherwise() -> None:
    book = DeadLetterBook(DeadLetterSettings(recent=10))
    capped = DeadLetterReader({"bootstrap.servers": "127.0.0.1:1"}, book, lookback=100, timeout_s=1)
    assert capped._config["queued.max.messages.kbytes"] == 4096, "librdkafka's own default is 65536"
    assert capped._config["fetch.queue.backoff.ms"] == 10, "a full queue waited 1 s (the default) to be fetched for"
    extra = {"bootstrap.servers": "127.0.0.1:1", "queued.max.messages.kbytes": 16384}
    assert DeadLetterReader(extra, book, lookback=100, timeout_s=1)._config["queued.max.messages.kbytes"] == 16384
