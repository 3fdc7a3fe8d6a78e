"""Every notification in: dedupe, convert, produce and wait for Kafka, a batch at a time.

Observers hand their notifications to :class:`NotificationBatcher` through their resource's
:class:`Inlet`. What is handed over in one event-loop turn, across resources, becomes one
batch at the end of the turn: deduplicated and converted in arrival order (so a resource's
readings keep the device's order), produced in one go, Kafka's confirmations awaited
together. Batches reach the producer in the order they were formed (its room is first come,
first served), so order holds across batches too.

A notification is done only when Kafka confirmed every record it became (or the
dead-letter topic confirmed its original bytes), so a stop never loses an accepted one. An
input too large to dead-letter whole goes bounded (see ``fluxgate_core.deadletter``); what
can be neither produced nor dead-lettered (Kafka away, a broken dead-letter topic) stops the
service (exit 1) rather than being dropped quietly: CoAP has no redelivery, so a loud stop
is the only honest answer.

Memory is bounded per resource: at most ``observe.queue_size`` of its notifications are
received and not yet done; then its observer waits, and aiocoap keeps only the latest state
meanwhile (observe is lossy, RFC 7641 §1.3).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import structlog

from fluxgate_coap_ingest import metrics
from fluxgate_coap_ingest.blockwise import TransferAbandoned
from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.dedupe import DedupeKey, DedupeWindow
from fluxgate_coap_ingest.observer import Notification
from fluxgate_core import metrics as core_metrics
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.delivery import Delivery, Letter, Outcome, classify, deliver_batch
from fluxgate_core.kafka import AsyncProducer, Headers

log = structlog.get_logger(__name__)
CONTENT_FORMAT_HEADER = "coap.content-format"
OBSERVE_HEADER = "coap.observe"


class NotificationHandler:
    """What one resource's notifications become, decided one at a time in arrival order."""

    def __init__(self, converter: NotificationConverter, dedupe: DedupeWindow) -> None:
        self._converter = converter
        self._dedupe = dedupe
        self._duplicates = metrics.DUPLICATES.labels(converter.resource.host)
        self._device = converter.resource.routed_device()  # parses the URI: once, not per notification

    def delivery(self, notification: Notification) -> Delivery | None:
        """The records of ``notification`` (or why it has none), or None for a duplicate.

        Remembered at once, not after Kafka's answer: the next notification may be decided
        before this one is confirmed, and one that ends up neither confirmed nor dead-lettered
        stops the service anyway."""
        if notification.abandoned:
            return self._rejected(notification, TransferAbandoned.after(len(notification.payload)))
        try:
            conversion = self._converter.conversion(
                notification.uri, notification.payload, notification.content_format, notification.received_ms
            )
        except Exception as exc:
            if classify(exc) is not Outcome.REJECTED:  # a payload that trips a bug: keep it, do not lose it
                log.exception("notification.convert_failed", uri=notification.uri)
            return self._rejected(notification, exc)
        key = DedupeWindow.key(notification.payload, notification.observe, device_timed=conversion.device_timed)
        if self._duplicate(key, notification):
            return None
        self._dedupe.remember(key)
        return Delivery(self._letter(notification), conversion.records)

    def _rejected(self, notification: Notification, error: BaseException) -> Delivery | None:
        # A broken payload replayed by a re-registration is dead-lettered once, not each time.
        key = DedupeWindow.key(notification.payload, notification.observe, device_timed=False)
        if self._duplicate(key, notification):
            return None
        log.warning("notification.rejected", uri=notification.uri, error=str(error), observe=notification.observe)
        self._dedupe.remember(key)
        return Delivery(self._letter(notification), rejected=error)

    def _duplicate(self, key: DedupeKey, notification: Notification) -> bool:
        if not self._dedupe.is_duplicate(key, first_after_register=notification.first_after_register):
            return False
        self._duplicates.inc()
        log.debug("notification.duplicate", uri=notification.uri, observe=notification.observe)
        return True

    def _letter(self, notification: Notification) -> Letter:
        return letter_of(notification, self._device)


class Handler(Protocol):
    """Decides what a notification becomes: :class:`NotificationHandler` (readings), or
    ``messages.MessageHandler`` (the CoAP message whole)."""

    def delivery(self, notification: Notification, /) -> Delivery | None: ...


def letter_of(notification: Notification, device: str | None) -> Letter:
    """The notification as it goes to the dead-letter topic if it must, keyed by ``device``."""
    headers = _coap_headers(notification.content_format, notification.observe)
    return Letter(notification.payload, notification.uri, device, headers)


def _coap_headers(content_format: int | None, observe: int | None) -> Headers:
    headers: list[tuple[str, bytes]] = []
    if content_format is not None:
        headers.append((CONTENT_FORMAT_HEADER, str(content_format).encode()))
    if observe is not None:
        headers.append((OBSERVE_HEADER, str(observe).encode()))
    return headers


class Inlet:
    """One resource's way into the batches: at most ``limit`` of its notifications undone."""

    __slots__ = ("_batcher", "_limit", "_room", "handler", "undone")

    def __init__(self, batcher: NotificationBatcher, handler: Handler, limit: int) -> None:
        self.handler = handler
        self.undone = 0
        self._batcher = batcher
        self._limit = limit
        self._room: asyncio.Future[None] | None = None  # one observer per resource: one waiter at most

    async def put(self, notification: Notification) -> None:
        """Hand ``notification`` over; wait while ``limit`` of this resource's are undone."""
        while self.undone >= self._limit:
            self._room = asyncio.get_running_loop().create_future()
            await self._room
        self.undone += 1
        self._batcher.receive(self, notification)

    def done(self) -> None:
        self.undone -= 1
        if self._room is not None and not self._room.done():
            self._room.set_result(None)


class NotificationBatcher:
    """Delivers the notifications of every resource, a batch per event-loop turn.

    ``on_fatal`` is told about a notification that could be neither produced nor dead-lettered.
    """

    def __init__(
        self,
        producer: AsyncProducer,
        dead_letters: DeadLetterWriter,
        on_fatal: Callable[[BaseException], None],
        limit_per_resource: int,
    ) -> None:
        self._producer = producer
        self._dead_letters = dead_letters
        self._on_fatal = on_fatal
        self._limit = limit_per_resource
        self._incoming: list[tuple[Inlet, Notification]] = []
        self._batches: set[asyncio.Task[None]] = set()

    def inlet(self, handler: Handler) -> Inlet:
        return Inlet(self, handler, self._limit)

    def receive(self, inlet: Inlet, notification: Notification) -> None:
        if not self._incoming:
            asyncio.get_running_loop().call_soon(self._start_batch)
        self._incoming.append((inlet, notification))

    async def drain(self, timeout: float) -> set[asyncio.Task[None]]:
        """Deliver what was handed over; return the batches still undone after ``timeout``."""
        if self._incoming:
            self._start_batch()
        if not self._batches:
            return set()
        _, undone = await asyncio.wait(set(self._batches), timeout=timeout)
        return undone

    def _start_batch(self) -> None:
        batch, self._incoming = self._incoming, []
        if not batch:  # drain() took it already
            return
        task = asyncio.get_running_loop().create_task(self._deliver(batch, time.monotonic()))
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _deliver(self, batch: list[tuple[Inlet, Notification]], received: float) -> None:
        _child(core_metrics.RECORDS_IN, "coap").inc(len(batch))
        decided: list[Notification] = []
        deliveries: list[Delivery] = []
        try:
            for inlet, notification in batch:
                delivery = inlet.handler.delivery(notification)
                if delivery is not None:
                    decided.append(notification)
                    deliveries.append(delivery)
            outcomes = await deliver_batch(self._producer, self._dead_letters, deliveries)
        except Exception as exc:  # a bug, or the producer gone: nothing of the batch is done
            decided = [notification for _, notification in batch]
            outcomes = [exc] * len(batch)
        finally:
            for inlet, _ in batch:
                inlet.done()
        for notification, failure in zip(decided, outcomes, strict=True):
            if failure is not None:
                self._not_delivered(notification, failure)
        core_metrics.END_TO_END_LATENCY.observe(time.monotonic() - received)

    def _not_delivered(self, notification: Notification, failure: BaseException) -> None:
        log.error(
            "notification.not_delivered", uri=notification.uri, error=str(failure), error_class=type(failure).__name__
        )
        self._on_fatal(failure)


class HostCountingDeadLetters(DeadLetterWriter):
    """Counts each dead letter Kafka took under its CoAP server's host (the letter's source URI)."""

    async def send(self, payload: bytes, *, source: str, **letter: Any) -> None:
        await super().send(payload, source=source, **letter)
        _child(metrics.DEAD_LETTERED, urlsplit(source).hostname or "").inc()


@functools.cache
def _child(metric: Any, *values: str) -> Any:
    """A labelled child, looked up once: ``labels()`` takes a lock and builds a key per call."""
    return metric.labels(*values)
