"""Idempotent topic creation: the broker runs with auto-creation off, so `up` makes these."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from fluxgate_stack.errors import StackError


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0) -> list[str]:
    """Create the topics that do not exist yet; returns the names created now."""
    # log_level 4 (warning): librdkafka would print an info line about its queue on shutdown
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "fluxgate-stack", "log_level": 4})
    existing = set(admin.list_topics(timeout=timeout).topics)
    wanted = [NewTopic(name, partitions, 1) for name, partitions in topics.items() if name not in existing]
    if not wanted:
        return []
    created = []
    for name, future in admin.create_topics(wanted, request_timeout=timeout).items():
        try:
            future.result()
            created.append(name)
        except KafkaException as exc:
            # Another `up` running at the same moment may have won the race: that is fine.
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise StackError(f"kafka: cannot create topic {name}: {exc}") from exc
    return created
