"""The input's end offsets, asked of Kafka by a client of our own.

Not through faust's consumer, whose thread is busy with the rebalance that precedes the
question; asked at the first timer tick after a restore, from a group-less librdkafka
consumer."""

from __future__ import annotations

import asyncio

from confluent_kafka import Consumer, KafkaException, TopicPartition

from fluxgate_core.errors import ConsumeError
from fluxgate_core.kafka_errors import converted
from fluxgate_core.settings import KafkaSettings


class EndOffsets:
    """Reads high watermarks with a group-less librdkafka consumer (it never subscribes)."""

    def __init__(self, kafka: KafkaSettings, default_client_id: str, timeout_s: float = 10.0) -> None:
        self._consumer = Consumer(kafka.assigned_consumer_config(default_client_id, "watermarks"))
        self._timeout_s = timeout_s

    async def ends(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """Each partition's end offset; :class:`ConsumeError` when Kafka does not answer in time."""
        try:
            return await asyncio.to_thread(self._ends, topic, partitions)
        except KafkaException as exc:
            raise converted(exc, ConsumeError, f"end offsets of {topic} {partitions}") from exc

    def _ends(self, topic: str, partitions: list[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for partition in partitions:
            _, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self._timeout_s)
            out[partition] = int(high)
        return out
