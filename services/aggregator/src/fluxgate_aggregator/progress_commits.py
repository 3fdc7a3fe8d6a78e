"""The offsets each finished micro-batch processed, committed to a Kafka consumer group.

The job resumes from Spark's checkpoint, never from this group: Spark's Kafka source does
not commit offsets. The copy exists for everything that measures progress by consumer group,
as it does for every other stage: lag exporters, KEDA, ``kafka-consumer-groups``, the
console, and ``make run``'s stop, which waits until the job has processed every reading the
gateways wrote before it stops the job.
"""

from __future__ import annotations

import json

import structlog
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition

from fluxgate_aggregator.settings import AggregatorSettings

log = structlog.get_logger(__name__)


def processed(end_offset: str | None) -> list[KafkaPartition]:
    """A Kafka source's ``endOffset`` in a query's progress (JSON: topic -> partition ->
    the next offset to read) as committable offsets; empty for any other source."""
    if not end_offset:
        return []
    try:
        topics = json.loads(end_offset)
    except ValueError:
        return []
    if not isinstance(topics, dict):
        return []
    return [
        KafkaPartition(topic, int(partition), int(offset))
        for topic, partitions in topics.items()
        if isinstance(partitions, dict)
        for partition, offset in partitions.items()
        if offset >= 0
    ]


class ProgressCommitter:
    """Commits to ``settings.progress_group``. A failed commit is logged, never raised: the
    copy is for monitoring, and the next batch's commit covers this one's offsets."""

    def __init__(self, settings: AggregatorSettings) -> None:
        group = settings.progress_group
        assert group is not None
        # A consumer that never subscribes: it only commits offsets for its group.
        self._consumer = Consumer(settings.kafka.consumer_config(group, "fluxgate-aggregator-progress"))
        self._group = group

    def commit(self, end_offset: str | None) -> None:
        offsets = processed(end_offset)
        if not offsets:
            return
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            log.warning("progress.commit_failed", group=self._group, error=str(error))

    def close(self) -> None:
        self._consumer.close()
