"""The notification handler and batcher with an in-memory producer: acks awaited, duplicates dropped,
dead letters, batches in order and bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.dedupe import DedupeWindow
from fluxgate_coap_ingest.handler import NotificationBatcher, NotificationHandler
from fluxgate_coap_ingest.observer import Notification
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_core import deadletter
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import DeliveryError
from fluxgate_core.kafka import KafkaRecord
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

    async def send_many(self, records: Sequence[KafkaRecord]) -> asyncio.Future[list[BaseException | None]]:
        """The batch face of the same per-record futures: one answer per record, once all are in."""
        futures = [await self.send(r.topic, r.value, key=r.key, headers=r.headers) for r in records]
        return asyncio.ensure_future(_answers(futures))

    async def deliver(self, topic: str, value: bytes, **kwargs: Any) -> Any:
        return await (await self.send(topic, value, **kwargs))


async def _answers(futures: Sequence[asyncio.Future[None]]) -> list[BaseException | None]:
    answers = await asyncio.gather(*futures, return_exceptions=True)
    return [answer if isinstance(answer, BaseException) else None for answer in answers]


class Ingest:
    """One resource's handler behind the batcher, as the service wires them."""

    def __init__(self, producer: FakeProducer, limit: int = 1000, **resource: Any) -> None:
        encoder = AvroEncoder(schema_dict(SENSOR_READING), 1)
        self.converter = NotificationConverter(ResourceSettings(uri=URI, **resource), encoder)
        dead_letters = DeadLetterWriter(producer, "dlq", "coap-ingest")
        self.fatal: list[BaseException] = []
        self.batcher = NotificationBatcher(producer, dead_letters, self.fatal.append, limit)
        self.handler = NotificationHandler(self.converter, DedupeWindow(16))
        self.inlet = self.batcher.inlet(self.handler)

    async def handle(self, notification: Notification) -> None:
        """Hand ``notification`` over and wait until it is done (or left undone)."""
        await self.inlet.put(notification)
        await self.batcher.drain(timeout=5)


def make_handler(producer: FakeProducer, **resource: Any) -> Ingest:
    return Ingest(producer, **resource)


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

    handler.converter.conversion = broken  # type: ignore[method-assign]
    await handler.handle(notification(TIMED))
    assert [(topic, value) for topic, value, _, _ in producer.sent] == [("dlq", TIMED)]
    assert dict(producer.sent[0][3])[deadletter.ERROR_CLASS] == b"KeyError"


async def test_what_can_be_neither_produced_nor_dead_lettered_stops_the_service() -> None:
    refusal = DeliveryError("Message size too large", retriable=False)
    ingest = make_handler(RefusingProducer({"sensors.readings", "dlq"}, refusal))
    await asyncio.wait_for(ingest.handle(notification(TIMED)), 5)
    assert ingest.fatal == [refusal]
    assert ingest.inlet.undone == 0  # given up, not left waiting


async def test_retriable_delivery_errors_are_not_dead_lettered() -> None:
    producer = RefusingProducer({"sensors.readings"}, DeliveryError("broker transport failure", retriable=True))
    ingest = make_handler(producer)
    await asyncio.wait_for(ingest.handle(notification(TIMED)), 5)
    assert [topic for topic, *_ in producer.sent] == ["sensors.readings"]
    assert len(ingest.fatal) == 1 and ingest.fatal[0].retriable  # type: ignore[attr-defined]


async def test_an_abandoned_block_wise_transfer_is_dead_lettered_not_parsed() -> None:
    producer = FakeProducer()
    head = TIMED * 10  # parsing it would fail differently: it is not looked at
    await make_handler(producer).handle(replace(notification(head), abandoned=True))
    ((topic, value, _, headers),) = producer.sent
    assert (topic, value) == ("dlq", head)
    assert dict(headers)[deadletter.ERROR_CLASS] == b"TransferAbandoned"
    assert f"over {len(head)} bytes: its transfer was abandoned".encode() in dict(headers)[deadletter.REASON]


# --- batches -------------------------------------------------------------------------------------

OTHER_URI = "coap://127.0.0.1:5683/sensors/dev-2/temperature"


def reading(device: str, millis: int) -> bytes:
    return f'{{"sensorId":"{device}","timestamp":{1_700_000_000_000 + millis},"temperature":21.5}}'.encode()


def record_value(ingest: Ingest, payload: bytes) -> bytes:
    """The record value ``payload`` becomes (the converter is pure: the same bytes each time)."""
    return ingest.converter.convert(URI, payload, 50, 1_700_000_000_500)[0].value


class CountingProducer(FakeProducer):
    """Also counts the hand-offs: one ``send_many`` per batch."""

    def __init__(self, auto_ack: bool = True) -> None:
        super().__init__(auto_ack)
        self.batches: list[int] = []

    async def send_many(self, records: Sequence[KafkaRecord]) -> asyncio.Future[list[BaseException | None]]:
        self.batches.append(len(records))
        return await super().send_many(records)


def second_inlet(ingest: Ingest) -> Any:
    converter = NotificationConverter(ResourceSettings(uri=OTHER_URI), ingest.converter._encoder)
    return ingest.batcher.inlet(NotificationHandler(converter, DedupeWindow(16)))


async def settle(turns: int = 20) -> None:
    """Let the event loop run what is ready (no time passes that a test relies on)."""
    for _ in range(turns):
        await asyncio.sleep(0)


def sent_devices(producer: FakeProducer) -> list[tuple[bytes, bytes]]:
    return [(key, value) for _topic, value, key, _headers in producer.sent]


async def test_notifications_of_one_turn_go_to_kafka_as_one_batch_in_arrival_order() -> None:
    producer = CountingProducer()
    ingest = Ingest(producer)
    other = second_inlet(ingest)
    payloads = [(ingest.inlet, reading("dev-1", 1)), (other, reading("dev-2", 1)), (ingest.inlet, reading("dev-1", 2))]
    for inlet, payload in payloads:
        await inlet.put(Notification(URI, payload, 50, 1, 1_700_000_000_500))
    await ingest.batcher.drain(timeout=5)
    assert producer.batches == [3]
    assert [key for key, _ in sent_devices(producer)] == [b"dev-1", b"dev-2", b"dev-1"]
    assert sent_devices(producer)[2][1] == record_value(ingest, reading("dev-1", 2))


async def test_a_later_batch_never_overtakes_an_earlier_one() -> None:
    producer = CountingProducer(auto_ack=False)
    ingest = Ingest(producer)
    for millis in (1, 2):
        await ingest.inlet.put(notification(reading("dev-1", millis)))
    await settle()  # the first batch is produced and waits for Kafka
    await ingest.inlet.put(notification(reading("dev-1", 3)))
    await settle()
    assert producer.batches == [2, 1]
    expected = [record_value(ingest, reading("dev-1", millis)) for millis in (1, 2, 3)]
    assert [value for _key, value in sent_devices(producer)] == expected
    producer.pending[2].set_result(None)  # Kafka answers the later batch first: it is done, the earlier not
    await settle()
    assert ingest.inlet.undone == 2
    for future in producer.pending[:2]:
        future.set_result(None)
    await ingest.batcher.drain(timeout=5)
    assert ingest.inlet.undone == 0 and ingest.fatal == []


async def test_a_notification_is_done_only_once_kafka_confirmed_all_of_its_batch() -> None:
    producer = FakeProducer(auto_ack=False)
    ingest = Ingest(producer)
    await ingest.inlet.put(notification(reading("dev-1", 1)))
    await ingest.inlet.put(notification(reading("dev-1", 2)))
    await settle()
    assert len(producer.pending) == 2 and ingest.inlet.undone == 2
    producer.pending[0].set_result(None)
    await settle()
    assert ingest.inlet.undone == 2  # one confirmation of two: the batch is not done
    producer.pending[1].set_result(None)
    await ingest.batcher.drain(timeout=5)
    assert ingest.inlet.undone == 0


async def test_a_resource_waits_while_its_bound_of_undone_notifications_is_reached() -> None:
    producer = FakeProducer(auto_ack=False)
    ingest = Ingest(producer, limit=2)
    other = second_inlet(ingest)
    await ingest.inlet.put(notification(reading("dev-1", 1)))
    await ingest.inlet.put(notification(reading("dev-1", 2)))
    third = asyncio.create_task(ingest.inlet.put(notification(reading("dev-1", 3))))
    await settle()
    assert not third.done() and len(producer.sent) == 2  # waits: Kafka has confirmed nothing
    await other.put(Notification(OTHER_URI, reading("dev-2", 1), 50, 1, 1_700_000_000_500))  # others go on
    await settle()
    assert len(producer.sent) == 3 and not third.done()
    producer.pending[0].set_result(None)
    producer.pending[1].set_result(None)
    await asyncio.wait_for(third, 5)
    assert ingest.inlet.undone == 1


async def test_a_failed_record_fails_its_notification_alone_and_refusals_are_dead_lettered() -> None:
    producer = FakeProducer(auto_ack=False)
    ingest = Ingest(producer)
    for millis in (1, 2, 3):
        await ingest.inlet.put(notification(reading("dev-1", millis)))
    await settle()
    producer.pending[0].set_result(None)
    producer.pending[1].set_exception(DeliveryError("broker transport failure", retriable=True))
    producer.pending[2].set_exception(DeliveryError("Message size too large", retriable=False))
    await settle()
    producer.pending[3].set_result(None)  # the dead letter of the third
    await ingest.batcher.drain(timeout=5)
    assert [str(error) for error in ingest.fatal] == ["broker transport failure"]  # the second alone
    assert [topic for topic, *_ in producer.sent] == ["sensors.readings"] * 3 + ["dlq"]
    assert producer.sent[3][1] == reading("dev-1", 3)
    assert ingest.inlet.undone == 0


async def test_a_batch_that_breaks_leaves_every_notification_undone_and_stops_the_service() -> None:
    class Broken(FakeProducer):
        async def send_many(self, records: Sequence[KafkaRecord]) -> asyncio.Future[list[BaseException | None]]:
            raise RuntimeError("producer gone")

    ingest = Ingest(Broken())
    await ingest.inlet.put(notification(reading("dev-1", 1)))
    await ingest.inlet.put(notification(reading("dev-1", 2)))
    await ingest.batcher.drain(timeout=5)
    assert [str(error) for error in ingest.fatal] == ["producer gone", "producer gone"]
    assert ingest.inlet.undone == 0


async def test_a_bug_in_deciding_leaves_the_whole_batch_undone_and_stops_the_service() -> None:
    producer = FakeProducer()
    ingest = Ingest(producer)

    def broken(notification: Notification) -> Any:
        raise RuntimeError("a bug")

    ingest.handler.delivery = broken  # type: ignore[method-assign]
    await ingest.inlet.put(notification(reading("dev-1", 1)))
    await ingest.inlet.put(notification(reading("dev-1", 2)))
    await ingest.batcher.drain(timeout=5)
    assert [str(error) for error in ingest.fatal] == ["a bug", "a bug"]
    assert producer.sent == [] and ingest.inlet.undone == 0


async def test_payloads_nested_past_any_recursion_limit_are_dead_lettered_and_ingest_goes_on() -> None:
    """As deep as the parser CVEs' proofs (100,000 levels, within the default 256 KiB), as JSON
    and as CBOR and SenML CBOR: each a dead letter that says why; the next reading goes to Kafka."""
    producer = FakeProducer()
    handler = make_handler(producer, device_id="dev-1")
    deep = [
        (b"[" * 100_000 + b"]" * 100_000, 50),
        (b"\x81" * 100_000 + b"\x01", 60),
        (b"\x81" * 100_000 + b"\x01", 112),
    ]
    for observe, (payload, cf) in enumerate(deep, start=1):
        await handler.handle(notification(payload, observe=observe, cf=cf))
    await handler.handle(notification(TIMED, observe=len(deep) + 1))
    assert [topic for topic, *_ in producer.sent] == ["dlq", "dlq", "dlq", "sensors.readings"]
    reasons = [dict(headers)[deadletter.REASON] for _, _, _, headers in producer.sent[:3]]
    assert b"not valid JSON: nested too deeply" in reasons[0]
    assert all(b"not valid CBOR: maximum container nesting depth (64) exceeded" in reason for reason in reasons[1:])
    assert handler.fatal == []
