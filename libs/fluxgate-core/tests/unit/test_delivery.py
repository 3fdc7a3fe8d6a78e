"""The shared delivery policy with an in-memory producer and dead-letter writer."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import REGISTRY

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.delivery import Delivery, Letter, Outcome, classify, deliver, deliver_batch, produce_all
from fluxgate_core.errors import (
    CommitError,
    ConfigError,
    DeliveryError,
    InvalidReading,
    PayloadError,
    RegistryError,
    SerializationError,
)
from fluxgate_core.kafka import Capacity, KafkaRecord
from fluxgate_core.kafka_errors import commit_error, config_error, converted


class FakeProducer:
    def __init__(self, failures: dict[str, BaseException] | None = None) -> None:
        self.failures = failures or {}
        self.sent: list[tuple[str, bytes, Any, list[Any]]] = []

    async def send(self, topic: str, value: bytes, *, key: Any = None, headers: Any = None) -> asyncio.Future[Any]:
        self.sent.append((topic, value, key, list(headers or ())))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        failure = self.failures.get(value.decode(errors="replace"))
        if failure is None:
            future.set_result(None)
        else:
            future.set_exception(failure)
        return future

    async def send_many(self, batch: list[KafkaRecord]) -> asyncio.Future[list[BaseException | None]]:
        answers = [await self.send(r.topic, r.value, key=r.key, headers=r.headers) for r in batch]
        future: asyncio.Future[list[BaseException | None]] = asyncio.get_running_loop().create_future()
        future.set_result([answer.exception() for answer in answers])
        return future


class FakeDeadLetters:
    def __init__(self, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.sent: list[tuple[bytes, BaseException, str, Any, list[Any]]] = []

    async def send(self, payload: bytes, *, error: BaseException, source: str, key: Any, headers: Any) -> None:
        if self.failure is not None:
            raise self.failure
        self.sent.append((payload, error, source, key, list(headers)))


def records(*values: str) -> list[KafkaRecord]:
    return [KafkaRecord("t", b"k", value.encode()) for value in values]


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (PayloadError("x"), Outcome.REJECTED),
        (InvalidReading("x"), Outcome.REJECTED),
        (SerializationError("x"), Outcome.REJECTED),
        (DeliveryError("too large", retriable=False), Outcome.REJECTED),
        (DeliveryError("timed out", retriable=True), Outcome.RETRIABLE),
        (RegistryError("away"), Outcome.RETRIABLE),
        (ConfigError("bad"), Outcome.FATAL),
        (RuntimeError("bug"), Outcome.FATAL),
    ],
)
def test_classify(error: BaseException, outcome: Outcome) -> None:
    assert classify(error) is outcome


async def test_produce_all_waits_for_every_ack_and_raises_the_first_failure() -> None:
    refused = DeliveryError("refused", retriable=False)
    producer = FakeProducer({"b": refused, "c": DeliveryError("later")})
    with pytest.raises(DeliveryError) as error:
        await produce_all(producer, records("a", "b", "c"))
    assert error.value is refused and len(producer.sent) == 3


async def test_deliver_dead_letters_what_kafka_refuses_for_good_with_the_original_headers() -> None:
    producer = FakeProducer({"b": DeliveryError("too large", retriable=False)})
    writer = FakeDeadLetters()
    letter = Letter(b"raw", "src", key=b"k", headers=[("h", b"1"), ("h", b"2"), ("n", None)])
    assert await deliver(producer, records("a"), writer, letter) is True
    assert await deliver(producer, records("a", "b"), writer, letter) is False
    assert [(p, s, k, h) for p, _, s, k, h in writer.sent] == [
        (b"raw", "src", b"k", [("h", b"1"), ("h", b"2"), ("n", None)])
    ]


async def test_deliver_raises_retriable_failures_and_failed_dead_letters() -> None:
    letter = Letter(b"raw", "src")
    with pytest.raises(DeliveryError):
        await deliver(FakeProducer({"a": DeliveryError("x", retriable=True)}), records("a"), FakeDeadLetters(), letter)
    gone = DeliveryError("dlq refused", retriable=False)
    with pytest.raises(DeliveryError, match="dlq refused"):
        await deliver(FakeProducer({"a": DeliveryError("x")}), records("a"), FakeDeadLetters(gone), letter)


def test_headers_keep_repeats_and_order() -> None:
    item = ConsumedRecord("t", 0, 1, None, b"", (("a", b"1"), ("b", None), ("a", b"2")), 0)
    assert item.header("a") == b"2" and item.header("b") is None and item.header("c") is None
    assert item.source == "t/0/1"


@pytest.mark.parametrize("code", [KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS, KafkaError._STATE])
def test_commit_errors_of_a_rebalance_are_not_retriable(code: int) -> None:
    error = commit_error(KafkaException(KafkaError(code)))
    assert isinstance(error, CommitError) and error.rebalanced and not error.retriable


def test_driver_errors_keep_their_retriable_flag() -> None:
    retriable = KafkaError(KafkaError.REQUEST_TIMED_OUT, retriable=True)
    assert converted(KafkaException(retriable), DeliveryError, "x").retriable
    assert not commit_error(KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))).rebalanced
    assert commit_error(RuntimeError("Consumer closed")).rebalanced
    assert "no.such" in str(config_error(KafkaException(KafkaError(KafkaError._INVALID_ARG, "no.such")), "consumer"))


async def test_deliver_batch_answers_per_input_and_dead_letters_only_the_rejected() -> None:
    too_large = DeliveryError("too large", retriable=False)
    away = DeliveryError("all brokers down", retriable=True)
    producer = FakeProducer({"b2": too_large, "c1": away})
    writer = FakeDeadLetters()
    inputs = [
        Delivery(Letter(b"a", "src-a"), records("a1", "a2")),
        Delivery(Letter(b"b", "src-b"), records("b1", "b2")),
        Delivery(Letter(b"c", "src-c"), records("c1")),
        Delivery(Letter(b"d", "src-d"), rejected=PayloadError("not JSON")),
    ]
    outcomes = await deliver_batch(producer, writer, inputs)
    assert outcomes == [None, None, away, None]  # b and d dead-lettered, c left undone
    assert [value for _, value, _, _ in producer.sent] == [b"a1", b"a2", b"b1", b"b2", b"c1"]  # in order
    assert [(payload, error) for payload, error, *_ in writer.sent] == [(b"b", too_large), (b"d", inputs[3].rejected)]


async def test_deliver_batch_all_confirmed_answers_none_each_and_counts_every_record() -> None:
    def out(topic: str) -> float:
        return REGISTRY.get_sample_value("fluxgate_records_out_total", {"topic": topic}) or 0.0

    topic_a, topic_b = f"a-{uuid.uuid4().hex}", f"b-{uuid.uuid4().hex}"
    inputs = [
        Delivery(Letter(b"1", "s"), [KafkaRecord(topic_a, b"k", b"1"), KafkaRecord(topic_b, b"k", b"2")]),
        Delivery(Letter(b"2", "s"), [KafkaRecord(topic_a, b"k", b"3")]),
    ]
    writer = FakeDeadLetters()
    assert await deliver_batch(FakeProducer(), writer, inputs) == [None, None]
    assert (out(topic_a), out(topic_b)) == (2.0, 1.0)
    assert writer.sent == []


async def test_deliver_batch_reports_a_dead_letter_kafka_did_not_take() -> None:
    broken = DeliveryError("no such topic", retriable=False)
    outcomes = await deliver_batch(
        FakeProducer(),
        FakeDeadLetters(broken),
        [Delivery(Letter(b"x", "src"), rejected=PayloadError("bad"))],
    )
    assert outcomes == [broken]


async def test_capacity_serves_requests_in_order_and_lets_an_oversized_one_through_alone() -> None:
    capacity = Capacity(10)
    await capacity.acquire(8)
    granted: list[str] = []

    async def take(name: str, count: int) -> None:
        await capacity.acquire(count)
        granted.append(name)

    waiters = [asyncio.ensure_future(take(name, count)) for name, count in (("big", 5), ("small", 1), ("huge", 25))]
    await asyncio.sleep(0)
    assert granted == []  # "small" would fit, but waits behind "big"
    capacity.release(8)
    await asyncio.sleep(0)
    assert granted == ["big", "small"]  # "huge" waits until nothing is taken
    capacity.release(6)
    await asyncio.gather(*waiters)
    assert granted == ["big", "small", "huge"]
