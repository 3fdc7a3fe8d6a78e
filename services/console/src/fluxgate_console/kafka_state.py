"""What Kafka says: each topic's end offsets, each consumer group's state, members and lag.

:class:`AdminKafka` asks a real cluster through confluent-kafka's ``AdminClient``;
:func:`kafka_state` turns any :class:`KafkaAnswers` (the real one, or recorded answers in
tests) into a :class:`KafkaState`, one topic or group failing only that topic or group.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from fluxgate_core.errors import FluxgateError


class KafkaUnavailable(FluxgateError):
    """Kafka did not answer in time, or refused the question."""

    retriable = True


@dataclass(frozen=True, slots=True)
class Member:
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class GroupAnswer:
    """A consumer group as Kafka describes it, with its committed offsets."""

    state: str
    members: tuple[Member, ...]
    committed: Mapping[tuple[str, int], int]


class KafkaAnswers(Protocol):
    def end_offsets(self, topics: Iterable[str]) -> dict[str, dict[int, int]]: ...

    def group(self, group: str) -> GroupAnswer: ...


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end: int
    owner: str | None

    @property
    def lag(self) -> int:
        return self.end - (self.committed or 0) if self.committed is not None else self.end


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str
    members: tuple[Member, ...] = ()
    partitions: tuple[PartitionLag, ...] = ()
    error: str | None = None

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def consumed(self) -> int:
        return sum(p.committed or 0 for p in self.partitions)


@dataclass(frozen=True)
class KafkaState:
    """Kafka as of ``at``; ``error`` when even the topics could not be read."""

    at: float
    ends: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    groups: Mapping[str, GroupState] = field(default_factory=dict)
    error: str | None = None

    def topic_total(self, topic: str) -> int | None:
        ends = self.ends.get(topic)
        return sum(ends.values()) if ends is not None else None


def kafka_state(answers: KafkaAnswers, topics: Iterable[str], groups: Mapping[str, Iterable[str]]) -> KafkaState:
    """Ends of ``topics`` and, for each group, its lag on the topics it reads (``groups``: group → topics)."""
    at = time.time()
    try:
        ends = answers.end_offsets(sorted(set(topics)))
    except (KafkaUnavailable, KafkaException) as exc:
        return KafkaState(at, error=f"Kafka: {exc}")
    described = {name: _group_state(answers, name, list(read), ends) for name, read in groups.items()}
    return KafkaState(at, ends, described)


def _group_state(
    answers: KafkaAnswers, name: str, topics: list[str], ends: Mapping[str, Mapping[int, int]]
) -> GroupState:
    try:
        answer = answers.group(name)
    except (KafkaUnavailable, KafkaException) as exc:
        return GroupState(name, "UNKNOWN", error=str(exc))
    owners = {tp: member.client_id or member.host for member in answer.members for tp in member.partitions}
    partitions = tuple(
        PartitionLag(topic, partition, answer.committed.get((topic, partition)), end, owners.get((topic, partition)))
        for topic in topics
        for partition, end in sorted(ends.get(topic, {}).items())
    )
    return GroupState(name, answer.state, answer.members, partitions)


class AdminKafka:
    """:class:`KafkaAnswers` from a real cluster; every call bounded by ``timeout_s``."""

    def __init__(self, config: dict[str, Any], timeout_s: float) -> None:
        self._admin = AdminClient(config)
        self._timeout = timeout_s

    def end_offsets(self, topics: Iterable[str]) -> dict[str, dict[int, int]]:
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailable(f"cannot list topics: {exc}") from exc
        wanted = {
            TopicPartition(topic, partition): OffsetSpec.latest()  # type: ignore[no-untyped-call]
            for topic in topics
            if topic in metadata.topics
            for partition in metadata.topics[topic].partitions
        }
        ends: dict[str, dict[int, int]] = {topic: {} for topic in topics if topic in metadata.topics}
        if not wanted:
            return ends
        futures = self._admin.list_offsets(wanted, request_timeout=self._timeout)
        for tp, future in futures.items():
            try:
                ends[tp.topic][tp.partition] = int(future.result().offset)
            except KafkaException as exc:
                raise KafkaUnavailable(f"cannot read the end of {tp.topic}/{tp.partition}: {exc}") from exc
        return ends

    def group(self, group: str) -> GroupAnswer:
        try:
            described = self._admin.describe_consumer_groups([group], request_timeout=self._timeout)[group].result()
            listed = self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self._timeout
            )[group].result()
        except KafkaException as exc:
            raise KafkaUnavailable(f"cannot describe group {group}: {exc}") from exc
        members = tuple(
            Member(
                m.client_id,
                m.host,
                tuple((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])),
            )
            for m in described.members
        )
        committed = {(tp.topic, tp.partition): int(tp.offset) for tp in listed.topic_partitions if tp.offset >= 0}
        return GroupAnswer(str(getattr(described.state, "name", described.state)), members, committed)

    def cluster_id(self) -> str | None:
        try:
            return self._admin.list_topics(timeout=self._timeout).cluster_id
        except KafkaException:
            return None
