"""Keeps one CoAP observation registered and hands its notifications on.

An observation ends for many reasons: the server restarts (it forgets its observers
and simply goes quiet), answers with an error, stops the observation, or a request
times out. Every end is the same to us: wait (exponential backoff, capped, jittered)
and register again. Silence longer than ``max_age_s`` counts as an end, because a
restarted server never tells its old observers anything.

Notifications go to a bounded sink (the resource's inlet into the batches, see
``handler``). aiocoap's own notification iterator is lossy by design (observe transfers
*state*, RFC 7641 §1.3: a client that falls behind sees the latest one), so the reader
here does nothing but move notifications into the sink; only when Kafka is slow for long
enough to fill the bound can intermediate states be skipped, which is what observe promises.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import aiocoap
import structlog
from aiocoap import error as coap_error

from fluxgate_coap_ingest import metrics
from fluxgate_coap_ingest.blockwise import ASSEMBLY_LIMIT_FACTOR, BlockMismatch, assemble
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_coap_ingest.settings import ObserveSettings
from fluxgate_core.backoff import Backoff
from fluxgate_core.errors import Retry
from fluxgate_core.limits import DEFAULT_MAX_PAYLOAD_BYTES

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Notification:
    """One response of an observation, as received."""

    uri: str
    payload: bytes
    content_format: int | None
    observe: int | None
    received_ms: int
    first_after_register: bool = False
    abandoned: bool = False  # block-wise with more than we fetch: ``payload`` is its first part
    message: aiocoap.Message | None = None  # the response itself (its first block), for output_format coap-message
    rtt_ms: int | None = None  # from sending the registration to receiving this


class NotificationSink(Protocol):
    """Where an observer puts its notifications; ``put`` waits while the sink is full."""

    async def put(self, notification: Notification, /) -> None: ...


class ObservationEnded(Exception):
    """An observation is over; ``reason`` is the metrics label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


class ResourceObserver:
    """Observes ``resource`` forever (until cancelled), re-registering whenever it ends."""

    def __init__(
        self,
        context: aiocoap.Context,
        resource: ResourceSettings,
        settings: ObserveSettings,
        sink: NotificationSink,
        rng: random.Random | None = None,
        max_bytes: int = ASSEMBLY_LIMIT_FACTOR * DEFAULT_MAX_PAYLOAD_BYTES,
        refusals_too: bool = False,
    ) -> None:
        """``max_bytes``: how much of a block-wise notification is fetched (see ``blockwise``);
        ``refusals_too``: hand on an error response too before re-registering (a CoAP message
        record says what the server answered; a reading has nothing to say of it)."""
        self.resource = resource
        self._refusals_too = refusals_too
        self._sent = time.monotonic()
        self._max_bytes = max_bytes
        self._context = context
        self._settings = settings
        self._sink = sink
        self._notified = metrics.NOTIFICATIONS.labels(resource.host)  # looked up once: labels() locks
        self._backoff = Backoff(
            settings.backoff_initial_s,
            max(settings.backoff_max_s, settings.backoff_initial_s),
            settings.backoff_multiplier,
            settings.backoff_jitter,
            rng or random.Random(),
        )
        self.active = False
        self.registrations = 0

    async def run(self) -> None:
        """The runner: observe, and on every :class:`Retry` wait as told, then observe again."""
        while True:
            try:
                await self.observe_once()
            except Retry as retry:
                await asyncio.sleep(retry.after)

    async def observe_once(self) -> None:
        """Register once and pass notifications on until the observation ends (then raise Retry)."""
        message = aiocoap.Message(code=aiocoap.GET, uri=self.resource.uri, observe=0)
        # Blocks are fetched by _assembled, with a bound; aiocoap would fetch them without one.
        request = self._context.request(message, handle_blockwise=False)
        self._sent = time.monotonic()
        try:
            await self._follow(request)
        except ObservationEnded as ended:
            raise self._retry(ended) from ended
        finally:
            self._set_active(False)
            if not request.observation.cancelled:
                request.observation.cancel()

    async def _follow(self, request: aiocoap.protocol.Request) -> None:
        first = await self._register(request)
        await self._enqueue(first, first_after_register=True)
        if first.opt.observe is None:
            # A resource that is not observable is polled, once per max-age window.
            raise Retry("resource is not observable; polling it", after=self._settings.max_age_s)
        async for notification in self._notifications(request):
            await self._enqueue(notification)
        raise ObservationEnded("ended", "the server ended the observation")

    async def _register(self, request: aiocoap.protocol.Request) -> aiocoap.Message:
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
            # arrives as the awaited item completes, and a reader that ignores its cancel
            # hangs the service's shutdown.
            async with asyncio.timeout(self._settings.request_timeout_s):
                first = await request.response
        except TimeoutError as exc:
            raise ObservationEnded("timeout", f"no answer within {self._settings.request_timeout_s}s") from exc
        except coap_error.Error as exc:
            raise ObservationEnded("error", f"{type(exc).__name__}: {exc}") from exc
        if not first.code.is_successful():
            await self._hand_on_refusal(first)
            raise ObservationEnded("refused", f"server answered {first.code}")
        self.registrations += 1
        self._backoff.reset()
        self._set_active(True)
        log.info("observation.registered", uri=self.resource.uri, observe=first.opt.observe)
        return first

    async def _notifications(self, request: aiocoap.protocol.Request) -> AsyncIterator[aiocoap.Message]:
        iterator = aiter(request.observation)
        while True:
            try:
                async with asyncio.timeout(self._settings.max_age_s):
                    notification = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise ObservationEnded("silence", f"no notification for {self._settings.max_age_s}s") from exc
            except coap_error.Error as exc:
                raise ObservationEnded("error", f"{type(exc).__name__}: {exc}") from exc
            if not notification.code.is_successful():
                await self._hand_on_refusal(notification)
                raise ObservationEnded("refused", f"server notified {notification.code}")
            yield notification

    async def _hand_on_refusal(self, message: aiocoap.Message) -> None:
        if self._refusals_too:
            await self._enqueue(message, first_after_register=True)

    async def _enqueue(self, message: aiocoap.Message, *, first_after_register: bool = False) -> None:
        received = time.monotonic()
        try:
            assembled = await assemble(
                self._context, self.resource.uri, message, self._max_bytes, self._settings.request_timeout_s
            )
        except BlockMismatch as exc:  # a newer state replaced it midway: that one is notified too
            log.info("notification.blockwise.dropped", uri=self.resource.uri, reason=str(exc))
            return
        except TimeoutError as exc:
            raise ObservationEnded("timeout", f"no block within {self._settings.request_timeout_s}s") from exc
        except coap_error.Error as exc:
            raise ObservationEnded("error", f"{type(exc).__name__}: {exc}") from exc
        content_format = message.opt.content_format
        notification = Notification(
            uri=self.resource.uri,
            payload=assembled.payload,
            content_format=None if content_format is None else int(content_format),
            observe=message.opt.observe,
            received_ms=int(time.time() * 1000),
            first_after_register=first_after_register,
            abandoned=assembled.abandoned,
            message=message,
            rtt_ms=round((received - self._sent) * 1000),
        )
        self._notified.inc()
        await self._sink.put(notification)

    def _retry(self, ended: ObservationEnded) -> Retry:
        delay = self._backoff.next_delay()
        metrics.REREGISTRATIONS.labels(self.resource.host, ended.reason).inc()
        log.warning("observation.ended", uri=self.resource.uri, reason=str(ended), retry_in_s=round(delay, 3))
        return Retry(str(ended), after=delay)

    def _set_active(self, active: bool) -> None:
        if active != self.active:
            metrics.OBSERVATIONS_ACTIVE.labels(self.resource.host).inc(1 if active else -1)
        self.active = active
