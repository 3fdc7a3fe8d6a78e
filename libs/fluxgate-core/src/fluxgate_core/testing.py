"""Helpers for the integration tests of every package (never imported at run time)."""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Message

from fluxgate_core.kafka import ensure_topics
from fluxgate_core.serde import AvroDecoder


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port nothing listens on right now (TCP by default, ``SOCK_DGRAM`` for UDP)."""
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unique_topic(prefix: str, bootstrap: str, partitions: int = 3) -> str:
    """Create and return a fresh topic so tests never see each other's records."""
    name = f"{prefix}.{uuid.uuid4().hex[:10]}"
    ensure_topics({"bootstrap.servers": bootstrap}, {name: partitions}, replication=1)
    return name


@dataclass
class Consumed:
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]
    partition: int
    offset: int
    record: dict[str, Any] | None = None


def consume(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = 30.0,
    idle: float = 2.0,
    decoder: AvroDecoder | None = None,
) -> list[Consumed]:
    """Read ``topic`` from the beginning until ``expected`` records arrived (or ``idle`` s of
    silence once at least that many arrived, to catch extras), or until ``timeout``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list[Consumed] = []
    deadline = time.monotonic() + timeout
    last_seen = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if expected is not None and len(out) >= expected and time.monotonic() - last_seen > idle:
                    break
                continue
            if msg.error():
                continue
            out.append(_consumed(msg, decoder))
            last_seen = time.monotonic()
    finally:
        consumer.close()
    return out


def _consumed(msg: Message, decoder: AvroDecoder | None) -> Consumed:
    value = msg.value() or b""
    raw_headers: list[tuple[str, bytes | None]] = list(msg.headers() or [])  # type: ignore[arg-type]
    headers = {key: value or b"" for key, value in raw_headers}
    record = decoder.decode(value) if decoder is not None else None
    return Consumed(msg.key(), value, headers, msg.partition() or 0, msg.offset() or 0, record)
