"""A record too large for its topic is refused alone, never with the records batched beside it."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from fluxgate_testing import unique_topic

from fluxgate_core.batches import fit_batches_to_topics
from fluxgate_core.errors import DeliveryError
from fluxgate_core.kafka import make_producer
from fluxgate_core.settings import KafkaSettings

pytestmark = pytest.mark.integration
LIMIT = 64 * 1024


def settings(stack: Any, linger_ms: int) -> KafkaSettings:
    return KafkaSettings.model_validate({"bootstrap_servers": stack.bootstrap, "linger_ms": linger_ms})


async def outcomes(config: dict[str, Any], topic: str) -> list[str]:
    """Ten small records around one over the topic's limit, all in one linger window."""
    producer = make_producer(config)
    await producer.start()
    try:
        values = [b"small"] * 5 + [os.urandom(2 * LIMIT)] + [b"small"] * 5  # random: lz4 cannot shrink it
        acks = [await producer.send(topic, value, key=b"d1") for value in values]
        results = await asyncio.gather(*acks, return_exceptions=True)
    finally:
        await producer.stop()
    return ["refused" if isinstance(result, DeliveryError) else "ok" for result in results]


async def test_a_record_over_the_topic_limit_is_refused_alone(stack: Any) -> None:
    topic = unique_topic("test.batches", stack.bootstrap, partitions=1, config={"max.message.bytes": str(LIMIT)})
    producer_config = settings(stack, linger_ms=200).producer_config("batches-test")
    fitted = await asyncio.to_thread(fit_batches_to_topics, producer_config, [topic, "test.batches.not-created"])
    assert fitted["batch.size"] == LIMIT - LIMIT // 16
    assert await outcomes(fitted, topic) == ["ok"] * 5 + ["refused"] + ["ok"] * 5
    # What librdkafka's default batch.size did: the whole batch refused with it.
    assert await outcomes(producer_config, topic) == ["refused"] * 11
