"""What happens to one notification: dedupe, convert, produce and wait for Kafka's ack.

A notification is done only when Kafka confirmed every record it became (or the
dead-letter topic confirmed its original bytes), so one resource's readings reach
Kafka in the order the device sent them and a stop never loses an accepted one. An input
too large to dead-letter whole goes bounded (see ``fluxgate_core.deadletter``); what
can be neither produced nor dead-lettered (Kafka away, a broken dead-letter topic) stops the
service (exit 1) rather than
being dropped quietly: CoAP has no redelivery, so a loud stop is the only honest answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from fluxgate_coap_ingest import metrics
from fluxgate_coap_ingest.blockwise import TransferAbandoned
from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.dedupe import DedupeWindow
from fluxgate_coap_ingest.observer import Notification
from fluxgate_core import metrics as core_metrics
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.delivery import Letter, Outcome, classify, dead_letter, produce_all
from fluxgate_core.kafka import AsyncProducer

log = structlog.get_logger(__name__)
CONTENT_FORMAT_HEADER = "coap.content-format"
OBSERVE_HEADER = "coap.observe"


class NotificationHandler:
    """Handles the notifications of one resource, one at a time, in arrival order."""

    def __init__(
        self,
        converter: NotificationConverter,
        dedupe: DedupeWindow,
        producer: AsyncProducer,
        dead_letters: DeadLetterWriter,
    ) -> None:
        self._converter = converter
        self._dedupe = dedupe
        self._producer = producer
        self._dead_letters = dead_letters
        self._host = converter.resource.host

    async def handle(self, notification: Notification) -> None:
        """Produce ``notification`` (or dead-letter it) and wait for Kafka's ack."""
        core_metrics.RECORDS_IN.labels("coap").inc()
        started = time.monotonic()
        if notification.abandoned:
            await self._reject(notification, TransferAbandoned.after(len(notification.payload)))
            return
        try:
            conversion = self._converter.conversion(
                notification.uri,
                notification.payload,
                notification.content_format,
                notification.received_ms,
            )
        except Exception as exc:
            if classify(exc) is not Outcome.REJECTED:  # a payload that trips a bug: keep it, do not lose it
                log.exception("notification.convert_failed", uri=notification.uri)
            await self._reject(notification, exc)
            return
        key = DedupeWindow.key(notification.payload, notification.observe, device_timed=conversion.device_timed)
        if self._duplicate(key, notification):
            return
        try:
            await produce_all(self._producer, conversion.records)
        except Exception as exc:
            if classify(exc) is not Outcome.REJECTED:
                raise
            await self._reject(notification, exc)  # Kafka will never take it (too large, ...): keep the bytes
            return
        self._dedupe.remember(key)
        core_metrics.END_TO_END_LATENCY.observe(time.monotonic() - started)

    async def _reject(self, notification: Notification, error: BaseException) -> None:
        # A broken payload replayed by a re-registration is dead-lettered once, not each time.
        key = DedupeWindow.key(notification.payload, notification.observe, device_timed=False)
        if self._duplicate(key, notification):
            return
        log.warning("notification.rejected", uri=notification.uri, error=str(error), observe=notification.observe)
        letter = Letter(
            notification.payload,
            source=notification.uri,
            key=self._converter.resource.routed_device(),
            headers=self._coap_headers(notification),
        )
        await dead_letter(self._dead_letters, letter, error)
        self._dedupe.remember(key)
        metrics.DEAD_LETTERED.labels(self._host).inc()

    def _duplicate(self, key: tuple[int | None, bytes], notification: Notification) -> bool:
        if not self._dedupe.is_duplicate(key, first_after_register=notification.first_after_register):
            return False
        metrics.DUPLICATES.labels(self._host).inc()
        log.debug("notification.duplicate", uri=notification.uri, observe=notification.observe)
        return True

    @staticmethod
    def _coap_headers(notification: Notification) -> list[tuple[str, bytes]]:
        headers: list[tuple[str, bytes]] = []
        if notification.content_format is not None:
            headers.append((CONTENT_FORMAT_HEADER, str(notification.content_format).encode()))
        if notification.observe is not None:
            headers.append((OBSERVE_HEADER, str(notification.observe).encode()))
        return headers


async def drain_queue(
    queue: asyncio.Queue[Notification], handler: NotificationHandler, on_fatal: Callable[[BaseException], None]
) -> None:
    """Handle notifications from ``queue`` until cancelled, or until one can be neither produced nor
    dead-lettered: then ``on_fatal`` stops the service instead of dropping it."""
    while True:
        notification = await queue.get()
        try:
            await handler.handle(notification)
        except Exception as exc:
            log.error(
                "notification.not_delivered", uri=notification.uri, error=str(exc), error_class=type(exc).__name__
            )
            on_fatal(exc)
            return
        finally:
            queue.task_done()
