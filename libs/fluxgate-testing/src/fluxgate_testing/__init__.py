"""Helpers for the integration tests of every package (never imported at run time)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from fluxgate_core.consumer import RecordConsumer
from fluxgate_core.kafka import ensure_topics
from fluxgate_core.settings import KafkaSettings
from fluxgate_testing.connect_schemas import CONNECT_TIMESTAMP, SENSOR_READING_CONNECT_SCHEMA
from fluxgate_testing.ports import free_port
from fluxgate_testing.process import ServiceProcess, descendants
from fluxgate_testing.secured import Principal, SecuredKafka

if TYPE_CHECKING:
    # Not re-exported: tests import ConsumedRecord from its one home, fluxgate_core.consumed_record.
    from fluxgate_core.consumed_record import ConsumedRecord, Decoder

__all__ = [
    "CONNECT_TIMESTAMP",
    "SENSOR_READING_CONNECT_SCHEMA",
    "Principal",
    "SecuredKafka",
    "ServiceProcess",
    "consume",
    "descendants",
    "free_port",
    "unique_topic",
]


def unique_topic(prefix: str, bootstrap: str, partitions: int = 3, config: dict[str, str] | None = None) -> str:
    """Create and return a fresh topic so tests never see each other's records."""
    name = f"{prefix}.{uuid.uuid4().hex[:10]}"
    ensure_topics({"bootstrap.servers": bootstrap}, {name: partitions}, replication=1, config=config)
    return name


def consume(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = 30.0,
    idle: float = 2.0,
    decoder: Decoder | None = None,
    complete: Callable[[list[ConsumedRecord]], bool] | None = None,
) -> list[ConsumedRecord]:
    """Read ``topic`` from the beginning until ``expected`` records arrived (then ``idle`` s of
    silence, to catch extras; 0 for a topic that never falls silent), or until ``timeout``.
    ``complete`` replaces the count where duplicates are allowed: a count can be reached
    while some records are still missing.
    A record that does not decode fails the test. Nothing is committed: the group is new each time."""
    settings = KafkaSettings.model_validate({"bootstrap_servers": bootstrap})
    consumer = RecordConsumer(settings.consumer_config(f"test-{uuid.uuid4().hex}", "fluxgate-test"), [topic], decoder)
    out: list[ConsumedRecord] = []
    deadline = time.monotonic() + timeout
    last_seen = time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = consumer.poll_batch(timeout=0.2)
            for item in batch:
                if item.error is not None:
                    raise item.error
            if batch:
                out.extend(batch)
                last_seen = time.monotonic()
            done = complete(out) if complete is not None else expected is not None and len(out) >= expected
            if done and time.monotonic() - last_seen >= idle:
                break
    finally:
        consumer.close()
    return out
