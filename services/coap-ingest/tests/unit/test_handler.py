"""The notification handler with an in-memory producer: acks awaited, duplicates dropped, dead letters."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.dedupe import DedupeWindow
from fluxgate_coap_ingest.handler import NotificationHandler, drain_queue
from fluxgate_coap_ingest.observer import Notification
from fluxgate_coap_ingest.settings import ResourceSettings
from fluxgate_core import deadletter
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import DeliveryError
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


async def test_a_reading_replayed_by_a_re_registration_gives_the_identical_record() -> None:
    """A restarted gateway has forgotten what it produced, so the current state replayed by its
    new registration (another observe number) reaches Kafka again: as the same record, which the
    aggregator's identity (device, metric, event time, value, sequence) then counts once."""
    before, after = FakeProducer(), FakeProducer()
    await make_handler(before).handle(notification(TIMED, observe=41))
    await make_handler(after).handle(notification(TIMED, observe=3, first=True))
    assert [value for _, value, _, _ in after.sent] == [value for _, value, _, _ in before.sent]
    assert len(before.sent) == 1


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


class RefusingProducer(FakeProducer):
    """Kafka refuses every record on ``refused`` topics with ``error``."""

    def __init__(self, refused: set[str], error: BaseException) -> None:
        super().__init__()
        self.refused, self.error = refused, error

    async def send(self, topic: str, value: bytes, *, key: Any = None, headers: Sequence[Any] | None = None) -> Any:
        future = await super().send(topic, value, key=key, headers=headers)
        if topic in self.refused:
            fresh: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            fresh.set_exception(self.error)
            return fresh
        return future


async def test_record_kafka_will_never_take_is_dead_lettered_with_the_original_bytes() -> None:
    producer = RefusingProducer({"sensors.readings"}, DeliveryError("Message size too large", retriable=False))
    await make_handler(producer).handle(notification(TIMED))
    topic, value, _, headers = producer.sent[-1]
    assert (topic, value) == ("dlq", TIMED)
    assert dict(headers)[deadletter.ERROR_CLASS] == b"DeliveryError"
    assert b"too large" in dict(headers)[deadletter.REASON]


async def test_payload_that_trips_a_bug_is_dead_lettered_not_lost() -> None:
    producer = FakeProducer()
    handler = make_handler(producer)

    def broken(*args: Any) -> Any:
        raise KeyError("a bug")

    handler._converter.conversion = broken  # type: ignore[method-assign]
    await handler.handle(notification(TIMED))
    assert [(topic, value) for topic, value, _, _ in producer.sent] == [("dlq", TIMED)]
    assert dict(producer.sent[0][3])[deadletter.ERROR_CLASS] == b"KeyError"


async def test_what_can_be_neither_produced_nor_dead_lettered_stops_the_service() -> None:
    refusal = DeliveryError("Message size too large", retriable=False)
    handler = make_handler(RefusingProducer({"sensors.readings", "dlq"}, refusal))
    queue: asyncio.Queue[Notification] = asyncio.Queue()
    fatal: list[BaseException] = []
    worker = asyncio.create_task(drain_queue(queue, handler, fatal.append))
    queue.put_nowait(notification(TIMED))
    await asyncio.wait_for(worker, 5)  # the worker ends: nothing after it is taken and dropped
    assert fatal == [refusal]
    await asyncio.wait_for(queue.join(), 1)


async def test_retriable_delivery_errors_are_not_dead_lettered() -> None:
    producer = RefusingProducer({"sensors.readings"}, DeliveryError("broker transport failure", retriable=True))
    fatal: list[BaseException] = []
    queue: asyncio.Queue[Notification] = asyncio.Queue()
    worker = asyncio.create_task(drain_queue(queue, make_handler(producer), fatal.append))
    queue.put_nowait(notification(TIMED))
    await asyncio.wait_for(worker, 5)
    assert [topic for topic, *_ in producer.sent] == ["sensors.readings"]
    assert len(fatal) == 1 and fatal[0].retriable  # type: ignore[attr-defined]


async def test_an_abandoned_block_wise_transfer_is_dead_lettered_not_parsed() -> None:
    producer = FakeProducer()
    head = TIMED * 10  # parsing it would fail differently: it is not looked at
    await make_handler(producer).handle(replace(notification(head), abandoned=True))
    ((topic, value, _, headers),) = producer.sent
    assert (topic, value) == ("dlq", head)
    assert dict(headers)[deadletter.ERROR_CLASS] == b"TransferAbandoned"
    assert f"over {len(head)} bytes: its transfer was abandoned".encode() in dict(headers)[deadletter.REASON]
