"""The bulk load's reading of what librdkafka hands over (``changelog_load._next_chunk``); the
integration tests (test_status.py, test_secured.py) read real changelogs with it."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message
from faust.types import TP
from structlog.testing import capture_logs

from fluxgate_core.settings import KafkaSettings
from fluxgate_device_status.changelog_load import PREFETCH_KBYTES, ChangelogLoader, Loaded, _assign, _next_chunk

CHANGELOG = "status-devices-changelog"


class Consumer:
    """Hands over given messages once (unit tests only)."""

    def __init__(self, *messages: Message) -> None:
        self.messages, self.unassigned = list(messages), []  # type: ignore[var-annotated]

    def consume(self, count: int, timeout: float) -> list[Message]:
        handed, self.messages = self.messages[:count], self.messages[count:]
        return handed

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self.unassigned += [(p.topic, p.partition) for p in partitions]


def record(partition: int, offset: int, key: bytes | None, value: bytes | None) -> Message:
    return Message(topic=CHANGELOG, partition=partition, offset=offset, key=key, value=value)


def error(code: int, partition: int | None = None, *, fatal: bool = False) -> Message:
    where = {} if partition is None else {"topic": CHANGELOG, "partition": partition}
    return Message(error=KafkaError(code, fatal=fatal), **where)


def test_records_until_each_partitions_end_tombstones_included_and_keyless_ones_left_out() -> None:
    remaining = {TP(CHANGELOG, 0), TP(CHANGELOG, 1)}
    consumer = Consumer(
        record(0, 4, b"a", b"1"),
        record(1, 0, b"b", None),
        record(1, 1, None, b"no key"),
        error(KafkaError._PARTITION_EOF, 0),
        record(0, 5, b"late", b"1"),  # fetched past the end said: faust's recovery reads it
    )
    chunk = _next_chunk(consumer, remaining)  # type: ignore[arg-type]
    assert chunk == [Loaded(TP(CHANGELOG, 0), 4, b"a", b"1"), Loaded(TP(CHANGELOG, 1), 0, b"b", None)]
    assert remaining == {TP(CHANGELOG, 1)} and consumer.unassigned == [(CHANGELOG, 0)]


def test_a_refused_group_is_no_partitions_error_and_a_fatal_one_stops_the_load() -> None:
    """Under least privilege the loader's group is refused (it never joins one): it reads on."""
    remaining = {TP(CHANGELOG, 0)}
    consumer = Consumer(error(KafkaError.GROUP_AUTHORIZATION_FAILED), record(0, 0, b"a", b"1"))
    assert _next_chunk(consumer, remaining) == [Loaded(TP(CHANGELOG, 0), 0, b"a", b"1")]  # type: ignore[arg-type]
    with pytest.raises(KafkaException):
        _next_chunk(Consumer(error(KafkaError._FENCED, fatal=True)), remaining)  # type: ignore[arg-type]


def test_a_partitions_own_error_stops_the_load_for_faust_to_read_instead() -> None:
    with pytest.raises(KafkaException):
        _next_chunk(Consumer(error(KafkaError.TOPIC_AUTHORIZATION_FAILED, 0)), {TP(CHANGELOG, 0)})  # type: ignore[arg-type]


class Partitions(Consumer):
    """Each partition's end offset, and what was assigned (unit tests only)."""

    def __init__(self, ends: dict[int, int]) -> None:
        super().__init__()
        self.ends, self.assigned = ends, []  # type: ignore[var-annotated]

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return 0, self.ends[partition.partition]

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = sorted((p.partition, p.offset) for p in partitions)


def test_only_partitions_with_records_past_their_start_are_assigned_and_only_if_enough_to_be_worth_it() -> None:
    starts = {TP(CHANGELOG, 0): 10, TP(CHANGELOG, 1): 0, TP(CHANGELOG, 2): 7}
    consumer = Partitions({0: 10, 1: 30_000, 2: 10_010})  # owed: 0, 30,000 and 10,003
    with capture_logs() as logs:
        assert _assign(consumer, starts, 40_004) == set() and consumer.assigned == []  # type: ignore[arg-type]
        assert _assign(consumer, {TP(CHANGELOG, 0): 10}, 40_004) == set()  # type: ignore[arg-type]  # nothing owed
    assert logs == [
        {"event": "table.load_left_to_faust", "records": 40_003, "min_records": 40_004, "log_level": "info"}
    ]
    assert _assign(consumer, starts, 40_003) == {TP(CHANGELOG, 1), TP(CHANGELOG, 2)}  # type: ignore[arg-type]
    assert consumer.assigned == [(1, 0), (2, 7)]


def test_the_loader_prefetches_a_few_mib_unless_the_kafka_extra_properties_say_otherwise() -> None:
    """librdkafka's 64 MiB default raised the peak by 83 MiB at 300,000 devices (changelog_load.py)."""
    config = ChangelogLoader(KafkaSettings(), "status")._config
    assert config["queued.max.messages.kbytes"] == PREFETCH_KBYTES == 4096
    assert config["fetch.queue.backoff.ms"] == 10  # not librdkafka's 1 s pause at the cap
    assert config["group.id"] == "status-changelog-load" and config["enable.partition.eof"] is True
    mine = ChangelogLoader(KafkaSettings(extra={"queued.max.messages.kbytes": "65536"}), "status")._config
    assert mine["queued.max.messages.kbytes"] == "65536"
