"""Producer batches that every target topic accepts, so a refusal is one record's alone.

The broker checks a record *batch* against the topic's ``max.message.bytes``, and
librdkafka fails every record of a refused batch. With librdkafka's default
``batch.size`` (1 MB) and a topic whose limit is smaller, one record too large for the
topic took the records batched with it (other messages, other devices) to the
dead-letter topic as "Message size too large". With ``batch.size`` under the smallest
limit of the topics a producer writes to, every batch of several records fits, and a
record over the limit travels alone and is refused alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

log = structlog.get_logger(__name__)
LIBRDKAFKA_BATCH_SIZE = 1_000_000  # librdkafka's default batch.size
# batch.size counts uncompressed bytes, the broker compressed ones: keep 1/16 for a codec
# that expands incompressible bytes a little, and for the batch's own framing.
HEADROOM_FRACTION = 16


def batch_size_within(limits: Iterable[int], configured: int = LIBRDKAFKA_BATCH_SIZE) -> int:
    """The largest ``batch.size`` up to ``configured`` that fits under every topic limit."""
    return max(1, min([configured, *(limit - limit // HEADROOM_FRACTION for limit in limits)]))


def topic_message_limits(config: dict[str, Any], topics: Iterable[str], timeout: float = 5.0) -> dict[str, int]:
    """``max.message.bytes`` of each topic that can be described (missing ones are left out:
    a topic not created yet, no DescribeConfigs permission, Kafka away)."""
    resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in sorted(set(topics))]
    try:
        admin = AdminClient(config)  # kept until the answers are in: dropping it cancels them
        futures = admin.describe_configs(resources, request_timeout=timeout)
    except (KafkaException, ValueError, TypeError) as exc:
        log.warning("kafka.topic_limits.unknown", error=str(exc))
        return {}
    limits: dict[str, int] = {}
    for resource, future in futures.items():
        try:
            limits[resource.name] = int(future.result(timeout=timeout)["max.message.bytes"].value)
        except (KafkaException, KeyError, ValueError, TimeoutError) as exc:
            log.warning("kafka.topic_limit.unknown", topic=resource.name, error=str(exc))
    return limits


def fit_batches_to_topics(config: dict[str, Any], topics: Iterable[str], timeout: float = 5.0) -> dict[str, Any]:
    """``config`` (a producer's) with a ``batch.size`` every one of ``topics`` accepts whole.

    Reads the topics' limits once (a blocking admin request: call it off the event loop);
    a limit lowered later is seen at the next start.
    """
    limits = topic_message_limits(config, topics, timeout)
    configured = int(config.get("batch.size", LIBRDKAFKA_BATCH_SIZE))
    size = batch_size_within(limits.values(), configured)
    if size != configured:
        log.info("kafka.batch_size.fitted", batch_size=size, topic_limits=limits)
    return {**config, "batch.size": size}
