"""The delivery policy every stage shares: produce, wait for Kafka, classify what failed.

A gateway's input is done only when Kafka confirmed every record it became, or the
dead-letter topic confirmed its original bytes. :func:`classify` says which of three
answers an error calls for; a sink runner classifies its write failures the same way.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import structlog

from fluxgate_core import metrics
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import ConfigError, FluxgateError, InvalidReading, PayloadError, SerializationError
from fluxgate_core.kafka import AsyncProducer, Headers, KafkaRecord

log = structlog.get_logger(__name__)
REJECTED_ERRORS = (PayloadError, InvalidReading, SerializationError)


class Outcome(enum.Enum):
    """What to do about an error."""

    REJECTED = "rejected"  # the input itself is bad and always will be: dead-letter it
    RETRIABLE = "retriable"  # the same attempt may work later (Kafka, registry, store away)
    FATAL = "fatal"  # neither: stop the service (configuration, a bug)


def classify(exc: BaseException) -> Outcome:
    """Parsing, validation and serialization failures, and any other non-retriable Fluxgate
    error (Kafka refusing one record as too large...), reject the input; a retriable one is
    retriable; configuration errors and anything that is not a Fluxgate error are fatal."""
    if isinstance(exc, REJECTED_ERRORS):
        return Outcome.REJECTED
    if isinstance(exc, ConfigError) or not isinstance(exc, FluxgateError):
        return Outcome.FATAL
    return Outcome.RETRIABLE if exc.retriable else Outcome.REJECTED


class Letter(NamedTuple):
    """The original input, as it goes to the dead-letter topic if it must (a named tuple: one
    is built per input, and a tuple is built several times faster than a frozen dataclass)."""

    payload: bytes
    source: str  # where it came from: an MQTT topic, a CoAP URI, ``topic/partition/offset``
    key: bytes | str | None = None
    headers: Headers = ()


async def produce_all(producer: AsyncProducer, records: Sequence[KafkaRecord]) -> None:
    """Produce ``records`` and return once Kafka confirmed every one; raise the first failure
    (:class:`~fluxgate_core.errors.DeliveryError`) after waiting for all of them."""
    # Send all first so they share Kafka batches, then wait for every acknowledgement.
    acks = [await producer.send(r.topic, r.value, key=r.key, headers=r.headers) for r in records]
    failure: BaseException | None = None
    for record, ack in zip(records, acks, strict=True):
        try:
            await ack
        except Exception as exc:
            failure = failure or exc
            continue
        _records_out(record.topic).inc()
    if failure is not None:
        raise failure


class Delivery(NamedTuple):
    """One input of a batch: the records it became, or why it could not become any."""

    letter: Letter
    records: Sequence[KafkaRecord] = ()
    rejected: BaseException | None = None


async def deliver_batch(
    producer: AsyncProducer, writer: DeadLetterWriter, deliveries: Sequence[Delivery]
) -> list[BaseException | None]:
    """:func:`deliver` for many inputs at once: every record is produced in order, Kafka's
    confirmations are awaited together, and the inputs rejected (before Kafka, or by it for
    good) are dead-lettered. Per input: None when it is done (confirmed or dead-lettered), or
    the retriable/fatal error that left it undone (its input must not be acknowledged)."""
    records = [record for delivery in deliveries for record in delivery.records]
    answers = await (await producer.send_many(records)) if records else []
    if not any(answers) and not any(delivery.rejected for delivery in deliveries):
        # Everything confirmed (the usual case): no per-input bookkeeping.
        _count_out(collections.Counter([record.topic for record in records]))
        return [None] * len(deliveries)
    outcomes: list[BaseException | None] = []
    confirmed: collections.Counter[str] = collections.Counter()
    start = 0
    for delivery in deliveries:
        end = start + len(delivery.records)
        failure = delivery.rejected or next((error for error in answers[start:end] if error is not None), None)
        if failure is None:
            confirmed.update(record.topic for record in delivery.records)
        elif delivery.rejected is None:
            confirmed.update(r.topic for r, e in zip(delivery.records, answers[start:end], strict=True) if e is None)
        outcomes.append(failure)
        start = end
    _count_out(confirmed)
    await _dead_letter_rejected(writer, deliveries, outcomes)
    return outcomes


async def _dead_letter_rejected(
    writer: DeadLetterWriter, deliveries: Sequence[Delivery], outcomes: list[BaseException | None]
) -> None:
    """Dead-letter the inputs rejected before Kafka (whatever the error: the caller decided) and
    those Kafka refused for good; their outcome becomes None, or the error of a dead letter
    Kafka did not take either."""
    rejected = [
        i
        for i, error in enumerate(outcomes)
        if error is not None and (deliveries[i].rejected is not None or classify(error) is Outcome.REJECTED)
    ]
    if not rejected:
        return
    sent = [dead_letter(writer, deliveries[i].letter, outcomes[i]) for i in rejected]  # type: ignore[arg-type]
    for i, result in zip(rejected, await asyncio.gather(*sent, return_exceptions=True), strict=True):
        outcomes[i] = result if isinstance(result, BaseException) else None


async def dead_letter(writer: DeadLetterWriter, letter: Letter, error: BaseException) -> None:
    """Send ``letter`` to the dead-letter topic with ``error`` as the reason; wait for Kafka."""
    log.info("deadletter.sent", source=letter.source, reason=str(error), error_class=type(error).__name__)
    await writer.send(letter.payload, error=error, source=letter.source, key=letter.key, headers=letter.headers)


async def deliver(
    producer: AsyncProducer, records: Sequence[KafkaRecord], writer: DeadLetterWriter, letter: Letter
) -> bool:
    """Produce ``records``; when Kafka rejects one for good, dead-letter ``letter`` instead.

    True when every record was confirmed, False when the input was dead-lettered. A
    retriable or fatal failure (and a dead letter Kafka did not take) is raised.
    """
    try:
        await produce_all(producer, records)
    except Exception as exc:
        if classify(exc) is not Outcome.REJECTED:
            raise
        await dead_letter(writer, letter, exc)
        return False
    return True


def _count_out(confirmed: collections.Counter[str]) -> None:
    for topic, count in confirmed.items():
        _records_out(topic).inc(count)


@functools.cache
def _records_out(topic: str) -> Any:
    """A labelled child, looked up once: ``labels()`` takes a lock and builds a key per call."""
    return metrics.RECORDS_OUT.labels(topic)
