"""The notification handler with an in-memory producer: acks awaited, duplicates dropped, dead letters."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.dedupe import DedupeWindow
from fluxgate_coap_ingest.handler import NotificationHandler, drain_queue
from fluxgate_coap_ingest.observer import Notification
from fluxgate_coap_ingest.settings import ResourceSettings
from fluxgate_core import deadletter
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder

URI = "coap://127.0.0.1:5683/sensors/dev-1/temperature"
TIMED = b'{"sensorId":"dev-1","timestamp":1700000000000,"temperature":21.5}'


class FakeProducer:
    """Records what is sent; acks at once, or when the test says so with ``auto_ack=False``."""

    def __init__(self, auto_ack: bool = True) -> None:
        self.auto_ack = auto_ack
        self.sent: list[tuple[str, bytes, Any, list[tuple[str, bytes]]]] = []
        self.pending: list[asyncio.Future[None]] = []
        self.sent_event = asyncio.Event()

    async def send(self, topic: str, value: bytes, *, key: Any = None, headers: Sequence[Any] | None = None) -> Any:
        self.sent.append((topic, value, key, list(headers or ())))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.auto_ack:
            future.set_result(None)
        self.pending.append(future)
        self.sent_event.set()
        return future

    async def deliver(self, topic: str, value: bytes, **kwargs: Any) -> Any:
        return await (await self.send(topic, value, **kwargs))


def make_handler(producer: FakeProducer, **resource: Any) -> NotificationHandler:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), 1)
    converter = NotificationConverter(ResourceSettings(uri=URI, **resource), encoder)
    dead_letters = DeadLetterWriter(producer, "dlq", "coap-ingest")  # type: ignore[arg-type]
    return NotificationHandler(converter, DedupeWindow(16), producer, dead_letters)  # type: ignore[arg-type]


def notification(payload: bytes, observe: int | None = 1, first: bool = False, cf: int | None = 50) -> Notification:
    return Notification(URI, payload, cf, observe, 1_700_000_000_500, first_after_register=first)


async def test_notification_is_done_only_after_kafka_acks() -> None:
    producer = FakeProducer(auto_ack=False)
    task = asyncio.create_task(make_handler(producer).handle(notification(TIMED)))
    await producer.sent_event.wait()
    assert not task.done()
    producer.pending[0].set_result(None)
    await task
    (topic, _value, key, _headers) = producer.sent[0]
    assert (topic, key) == ("sensors.readings", b"dev-1")


async def test_duplicates_are_produced_once() -> None:
    producer = FakeProducer()
    handler = make_handler(producer)
    await handler.handle(notification(TIMED, observe=5))
    await handler.handle(notification(TIMED, observe=6))
    await handler.handle(notification(TIMED, observe=1, first=True))
    assert len(producer.sent) == 1


async def test_replayed_state_after_reregistration_is_dropped() -> None:
    producer = FakeProducer()
    handler = make_handler(producer, device_id="dev-1", metric="temperature")
    await handler.handle(notification(b"21.5", observe=5))
    await handler.handle(notification(b"21.5", observe=6))  # same value, new reading
    await handler.handle(notification(b"21.5", observe=2, first=True))  # replayed current state
    assert len(producer.sent) == 2


async def test_malformed_payload_is_dead_lettered_with_original_bytes_and_reason() -> None:
    producer = FakeProducer()
    handler = make_handler(producer, device_id="dev-1")
    broken = b'{"sensorId": "dev-1", "temperature": '
    await handler.handle(notification(broken, observe=9))
    await handler.handle(notification(broken, observe=1, first=True))  # replay: dead-lettered once
    (topic, value, key, headers) = producer.sent[0]
    assert len(producer.sent) == 1
    assert (topic, value, key) == ("dlq", broken, "dev-1")
    named = dict(headers)
    assert b"not valid JSON" in named[deadletter.REASON]
    assert named[deadletter.ERROR_CLASS] == b"PayloadError"
    assert named[deadletter.SOURCE] == URI.encode()
    assert named["coap.content-format"] == b"50"
    assert named["coap.observe"] == b"9"


async def test_invalid_reading_is_dead_lettered() -> None:
    producer = FakeProducer()
    await make_handler(producer).handle(notification(b'{"temperature": 20}'))  # no device anywhere
    assert producer.sent[0][0] == "dlq"
    assert dict(producer.sent[0][3])[deadletter.ERROR_CLASS] == b"InvalidReading"


async def test_drain_queue_keeps_going_after_a_failure() -> None:
    producer = FakeProducer()
    handler = make_handler(producer)
    queue: asyncio.Queue[Notification] = asyncio.Queue()
    failing = FakeProducer()

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    failing.send = refuse  # type: ignore[method-assign]
    broken_handler = make_handler(failing)
    worker = asyncio.create_task(drain_queue(queue, broken_handler))
    queue.put_nowait(notification(TIMED))
    await asyncio.wait_for(queue.join(), 5)
    assert not worker.done()
    worker.cancel()
    worker = asyncio.create_task(drain_queue(queue, handler))
    queue.put_nowait(notification(TIMED))
    await asyncio.wait_for(queue.join(), 5)
    worker.cancel()
    assert len(producer.sent) == 1
