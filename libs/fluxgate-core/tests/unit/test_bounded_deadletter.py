"""Bounded dead letters: what cannot go whole goes as head, size and SHA-256, and is confirmed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from fluxgate_core import deadletter
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import DeliveryError, PayloadError


class Producer:
    """Refuses records over ``max_bytes`` (value plus headers) for good, like Kafka does."""

    def __init__(self, max_bytes: int, retriable: bool = False) -> None:
        self.max_bytes, self.retriable = max_bytes, retriable
        self.delivered: list[tuple[bytes, Any, dict[str, bytes]]] = []

    async def deliver(self, topic: str, value: bytes, *, key: Any = None, headers: Any = None) -> None:
        size = len(value) + sum(len(k) + len(v or b"") for k, v in headers)
        if size > self.max_bytes:
            raise DeliveryError("Kafka rejected record: Broker: Message size too large", retriable=self.retriable)
        self.delivered.append((value, key, dict(headers)))


def writer(producer: Producer, **options: Any) -> DeadLetterWriter:
    return DeadLetterWriter(producer, "dlq", "test", **options)


async def test_over_max_whole_bytes_goes_bounded_without_trying() -> None:
    payload = b"x" * (2 * 1024 * 1024)
    producer = Producer(max_bytes=10**9)
    await writer(producer, max_whole_bytes=1024, head_bytes=100).send(
        payload, error=PayloadError("too big"), source="s/1", key="k" * 5000, headers=[("p", b"v" * 10_000)]
    )
    [(value, key, headers)] = producer.delivered
    assert value == payload[:100]
    assert len(key) == deadletter.MAX_KEY_BYTES
    assert headers[deadletter.PAYLOAD_SIZE] == str(len(payload)).encode()
    assert headers[deadletter.PAYLOAD_SHA256] == hashlib.sha256(payload).hexdigest().encode()
    assert headers[deadletter.TRUNCATED] == b"true"
    assert headers[deadletter.REASON] == b"too big" and headers[deadletter.SOURCE] == b"s/1"
    assert b"over 1024 bytes" in headers[deadletter.BOUNDED_BECAUSE]
    assert headers[deadletter.HEADERS_DROPPED] == b"1" and "p" not in headers


async def test_whole_refused_for_good_then_bounded() -> None:
    producer = Producer(max_bytes=8192)
    await writer(producer, head_bytes=64).send(b"y" * 20_000, error=PayloadError("bad"), source="s")
    [(value, _, headers)] = producer.delivered
    assert value == b"y" * 64
    assert b"whole dead letter was refused" in headers[deadletter.BOUNDED_BECAUSE]


async def test_small_payload_goes_whole() -> None:
    producer = Producer(max_bytes=8192)
    await writer(producer, max_whole_bytes=1024).send(b"z" * 10, error=PayloadError("bad"), source="s")
    [(value, _, headers)] = producer.delivered
    assert value == b"z" * 10 and deadletter.TRUNCATED not in headers


async def test_retriable_refusal_is_raised_not_bounded() -> None:
    producer = Producer(max_bytes=10, retriable=True)
    with pytest.raises(DeliveryError):
        await writer(producer).send(b"w" * 100, error=PayloadError("bad"), source="s")
    assert producer.delivered == []


async def test_bounded_refused_too_is_raised() -> None:
    with pytest.raises(DeliveryError):
        await writer(Producer(max_bytes=64)).send(b"v" * 100, error=PayloadError("bad"), source="s")
