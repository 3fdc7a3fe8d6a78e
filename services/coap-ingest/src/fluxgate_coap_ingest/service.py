"""The service's lifecycle: register schemas (Avro output), start the producer, observe, drain on stop."""

from __future__ import annotations

import asyncio
from types import TracebackType

import aiocoap
import structlog
from aiocoap.defaults import dtls_missing_modules

from fluxgate_coap_ingest.blockwise import ASSEMBLY_LIMIT_FACTOR
from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.datagrams import read_waiting_datagrams, receive_whole_datagrams
from fluxgate_coap_ingest.dedupe import DedupeWindow
from fluxgate_coap_ingest.handler import Handler, HostCountingDeadLetters, NotificationBatcher, NotificationHandler
from fluxgate_coap_ingest.messages import CoapMessageConverter, MessageHandler
from fluxgate_coap_ingest.observer import ResourceObserver
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_coap_ingest.settings import SERVICE, CoapIngestSettings
from fluxgate_core.errors import ConfigError
from fluxgate_core.gateway import open_gateway_output
from fluxgate_core.kafka import AsyncProducer
from fluxgate_core.schemas import COAP_MESSAGE, SENSOR_READING
from fluxgate_core.serde import RecordEncoder
from fluxgate_core.topic_watch import TopicWatch

log = structlog.get_logger(__name__)


class CoapIngestService:
    """Observes every configured resource; ``stop()`` drains and is safe to call twice.

    ``fatal`` says why the service asked to stop early (``stop`` is set then): a
    notification that could be neither produced nor dead-lettered.
    """

    def __init__(self, settings: CoapIngestSettings, stop: asyncio.Event | None = None) -> None:
        self.settings = settings
        self.fatal: BaseException | None = None
        self._stop = stop or asyncio.Event()
        self.observers: list[ResourceObserver] = []
        self._producer: AsyncProducer | None = None
        self._watch: TopicWatch | None = None  # a topic deleted while running: not ready
        self._context: aiocoap.Context | None = None
        self._batcher: NotificationBatcher | None = None
        self._readers: list[asyncio.Task[None]] = []
        self._started = False

    async def start(self) -> None:
        """Fail fast: registry (Avro output), Kafka producer and CoAP context before any observation."""
        check_dtls_available(self.settings.resources)
        settings = self.settings
        output = await open_gateway_output(
            SERVICE,
            settings.kafka,
            settings.registry,
            [resource.topic for resource in settings.observed],
            settings.deadletter_topic,
            settings.max_in_flight,
            COAP_MESSAGE if settings.output_format == "coap-message" else SENSOR_READING,
            env_prefix=str(settings.model_config["env_prefix"]),
            topics_setting="kcql" if settings.kcql is not None else "resources",
            output=settings.output,
        )
        self._producer, encoders, self._watch = output.producer, output.encoders, output.watch
        receive_whole_datagrams()
        read_waiting_datagrams()
        self._context = await aiocoap.Context.create_client_context()
        load_credentials(self._context, self.settings)
        dead_letters = output.dead_letters(HostCountingDeadLetters, settings.limits)
        self._batcher = NotificationBatcher(self._producer, dead_letters, self._fail, self.settings.observe.queue_size)
        for resource in self.settings.observed:
            self._observe(resource, encoders[resource.topic], self._batcher)
        self._started = True
        log.info(
            "service.started",
            resources=len(self.settings.observed),
            member=f"{self.settings.member} of {self.settings.members}",
        )

    def ready(self) -> bool:
        """Kafka reachable and any (or all, per ``readiness``) observation registered."""
        if not self._started or self._producer is None or not self._producer.healthy():
            return False
        if self._watch is not None and not self._watch.present():
            return False
        active = [observer.active for observer in self.observers]
        if not active:
            return True
        return all(active) if self.settings.readiness == "all" else any(active)

    async def run(self, stop: asyncio.Event) -> None:
        """Observe until ``stop`` is set (by a signal, or by :attr:`fatal`), then drain."""
        self._stop = stop
        async with self:
            await stop.wait()

    async def stop(self, drain_timeout: float = 10.0) -> None:
        """Stop observing, hand what was received to Kafka, wait for the acks."""
        self._started = False
        if self._watch is not None:
            self._watch.stop()
        await _cancel(self._readers)
        if self._batcher is not None:
            undone = await self._batcher.drain(drain_timeout)
            if undone:
                log.warning("service.stop.unhandled", batches=len(undone))
            await _cancel(list(undone))
        if self._context is not None:
            await self._context.shutdown()
            self._context = None
        if self._producer is not None:
            # Bounded so drain + flush fit a container's default 30 s stop grace period.
            await self._producer.stop(timeout=15.0)
            self._producer = None
        log.info("service.stopped")

    async def __aenter__(self) -> CoapIngestService:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _observe(self, resource: ResourceSettings, encoder: RecordEncoder, batcher: NotificationBatcher) -> None:
        assert self._context is not None
        messages = self.settings.output_format == "coap-message"
        inlet = batcher.inlet(self._handler(resource, encoder))
        fetched = ASSEMBLY_LIMIT_FACTOR * self.settings.limits.max_payload_bytes
        observer = ResourceObserver(
            self._context, resource, self.settings.observe, inlet, max_bytes=fetched, refusals_too=messages
        )
        self.observers.append(observer)
        self._readers.append(asyncio.create_task(observer.run(), name=f"observe {resource.uri}"))

    def _handler(self, resource: ResourceSettings, encoder: RecordEncoder) -> Handler:
        """What ``resource``'s notifications become, by ``output_format``."""
        limits = self.settings.limits
        if self.settings.output_format == "coap-message":
            return MessageHandler(CoapMessageConverter(resource, encoder, limits.max_payload_bytes))
        converter = NotificationConverter(resource, encoder, limits=limits.payload_limits())
        return NotificationHandler(converter, DedupeWindow(self.settings.observe.dedupe_window))

    def _fail(self, exc: BaseException) -> None:
        if self.fatal is None:
            self.fatal = exc
        self._stop.set()


def check_dtls_available(resources: list[ResourceSettings]) -> None:
    """coaps:// needs aiocoap's tinydtls transport (the DTLSSocket package)."""
    missing = dtls_missing_modules()
    for index, resource in enumerate(resources):
        if resource.secure and missing:
            raise ConfigError(
                f"resources.{index}.uri [env FLUXGATE_COAP_RESOURCES]: {resource.uri} needs DTLS, but "
                f"{', '.join(missing)} is not installed (pip install 'fluxgate-coap-ingest[dtls]')"
            )


def load_credentials(context: aiocoap.Context, settings: CoapIngestSettings) -> None:
    """Give aiocoap the PSK of every coaps:// resource (its own, else the default one)."""
    for resource in settings.resources:
        if not resource.secure:
            continue
        identity = resource.psk_identity or settings.dtls.psk_identity or ""
        key = resource.psk_key or settings.dtls.key()
        assert key is not None, "settings validation guarantees a key for every coaps resource"
        # The lookup matches the request URI as aiocoap renders it (default port dropped ...).
        rendered = aiocoap.Message(code=aiocoap.GET, uri=resource.uri).get_request_uri()
        dtls = {"psk": key.get_secret_value().encode(), "client-identity": identity.encode()}
        context.client_credentials.load_from_dict({rendered: {"dtls": dtls}})


async def _cancel(tasks: list[asyncio.Task[None]], timeout: float = 5.0) -> None:
    """Cancel and wait, bounded: a task that ignores its cancel is logged, never waited on forever."""
    for task in tasks:
        task.cancel()
    if tasks:
        _, stuck = await asyncio.wait(tasks, timeout=timeout)
        for task in stuck:
            log.error("service.stop.task_stuck", task=task.get_name())
        for task in set(tasks) - stuck:
            if not task.cancelled() and task.exception() is not None:
                log.warning("service.stop.task_failed", task=task.get_name(), error=repr(task.exception()))
    tasks.clear()
