"""The proxy's lifecycle: connect, subscribe, turn messages into records, ack after Kafka.

Order of shutdown on SIGTERM: stop reading the socket, let every message being handled
reach Kafka and be acknowledged, flush, then disconnect without unsubscribing, so the
broker keeps the persistent session and queues what arrives until we are back.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from gmqtt import Client, Subscription

from fluxgate_core import metrics as core_metrics
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import DeliveryError, FluxgateError, InvalidReading, PayloadError, SerializationError
from fluxgate_core.health import HealthServer
from fluxgate_core.kafka import AsyncProducer, make_producer
from fluxgate_core.schemas import SENSOR_READING, schema_dict, schema_text
from fluxgate_core.serde import AvroEncoder, registry_client
from fluxgate_mqtt_proxy import metrics
from fluxgate_mqtt_proxy.client import Backoff, SocketValve, make_client, tls_context
from fluxgate_mqtt_proxy.convert import MessageConverter
from fluxgate_mqtt_proxy.routing import Route, compile_routes
from fluxgate_mqtt_proxy.settings import SERVICE, ProxySettings

log = structlog.get_logger(__name__)
REJECTED = (PayloadError, InvalidReading, SerializationError)
DRAIN_TIMEOUT_S = 30.0


class MqttProxy:
    """One proxy replica. ``await run(stop)`` returns after a clean drain."""

    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self.routes: list[Route] = compile_routes(settings.routes, settings.mqtt.share_group)
        self.fatal: BaseException | None = None
        self._connected = False
        self._stop = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        producer = make_producer(
            self.settings.kafka.producer_config(SERVICE), max_in_flight=self.settings.max_in_flight
        )
        converter = MessageConverter(self.routes, self._encoders())
        await producer.start()
        health = HealthServer(self.settings.http, {"mqtt": lambda: self._connected, "kafka": producer.healthy}).start()
        client = make_client(self.settings.mqtt)
        valve = SocketValve(client, self.settings.max_pending_messages)
        self._wire(client, converter, producer, valve)
        try:
            await self._connect(client)
            await stop.wait()
        finally:
            await self._drain(client, producer, valve)
            health.stop()

    def _encoders(self) -> dict[str, AvroEncoder]:
        """Register the SensorReading schema for every target topic before reading anything."""
        client = registry_client(self.settings.registry)
        compatibility = self.settings.registry.compatibility
        topics = {route.settings.topic for route in self.routes}
        return {
            topic: AvroEncoder.registered(
                client, topic, schema_text(SENSOR_READING), schema_dict(SENSOR_READING), compatibility
            )
            for topic in topics
        }

    def _wire(self, client: Client, converter: MessageConverter, producer: AsyncProducer, valve: SocketValve) -> None:
        backoff = Backoff(client, self.settings.mqtt.reconnect_initial_s, self.settings.mqtt.reconnect_max_s)
        dead_letters = DeadLetterWriter(producer, self.settings.deadletter_topic, SERVICE)
        handler = MessageHandler(converter, producer, dead_letters, valve, self._fail)

        def on_connect(client: Client, flags: Any, rc: Any, properties: Any) -> None:
            backoff.connected()
            self._subscribe(client)
            log.info("mqtt.connected", session_present=flags, host=self.settings.mqtt.host)

        def on_disconnect(client: Client, packet: Any, exc: Any = None) -> None:
            self._connected = False
            metrics.CONNECTED.set(0)
            metrics.RECONNECTS.inc()
            backoff.disconnected()
            log.warning("mqtt.disconnected", retry_in_s=client.reconnect_delay)

        def on_subscribe(client: Client, mid: int, qos: Any, properties: Any) -> None:
            granted = list(qos) if isinstance(qos, tuple | list) else [qos]
            self._connected = all(code < 128 for code in granted)
            metrics.CONNECTED.set(1 if self._connected else 0)
            log.info("mqtt.subscribed", granted=granted, ready=self._connected)

        client.on_connect = on_connect
        client.on_disconnect = on_disconnect
        client.on_subscribe = on_subscribe
        client.on_message = handler.on_message  # a coroutine function: gmqtt acks when it returns

    def _subscribe(self, client: Client) -> None:
        # Also after a resumed session: subscribing again is idempotent, and it is what
        # brings subscriptions back when the broker lost the session (restart without
        # persistence, expiry).
        client.subscribe([Subscription(route.subscription, qos=route.settings.qos) for route in self.routes])

    async def _connect(self, client: Client) -> None:
        """First connection, retried with backoff: the broker may start after us."""
        mqtt = self.settings.mqtt
        delay = mqtt.reconnect_initial_s
        while not self._stop.is_set():
            try:
                await client.connect(
                    mqtt.host, mqtt.port, ssl=tls_context(mqtt), keepalive=mqtt.keepalive_s, version=_version(mqtt)
                )
                return
            except (TimeoutError, OSError, Exception) as exc:  # gmqtt raises its own error types too
                log.warning("mqtt.connect.failed", error=str(exc), retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, mqtt.reconnect_max_s)

    async def _drain(self, client: Client, producer: AsyncProducer, valve: SocketValve) -> None:
        valve.pause()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while valve.pending and time.monotonic() < deadline:  # noqa: ASYNC110 - polls a counter gmqtt's tasks change
            await asyncio.sleep(0.05)
        await producer.stop()
        try:
            await client.disconnect()
        except Exception as exc:  # already gone: the session is the broker's either way
            log.info("mqtt.disconnect.failed", error=str(exc))
        log.info("shutdown.drained", unacknowledged=valve.pending)

    def _fail(self, exc: BaseException) -> None:
        """A message could neither be produced nor dead-lettered: stop, unacknowledged."""
        self.fatal = exc
        self._stop.set()


def _version(settings: Any) -> int:
    from gmqtt.mqtt.constants import MQTTv50, MQTTv311

    return int(MQTTv50 if settings.protocol_version == 5 else MQTTv311)


class MessageHandler:
    """gmqtt's on_message: returns the reason code gmqtt puts in PUBACK/PUBREC."""

    def __init__(
        self,
        converter: MessageConverter,
        producer: AsyncProducer,
        dead_letters: DeadLetterWriter,
        valve: SocketValve,
        fail: Any,
    ) -> None:
        self._converter = converter
        self._producer = producer
        self._dead_letters = dead_letters
        self._valve = valve
        self._fail = fail

    async def on_message(self, client: Client, topic: str, payload: bytes, qos: int, properties: Any) -> int:
        started = time.monotonic()
        self._valve.entered()
        metrics.MESSAGES.labels(str(qos)).inc()
        core_metrics.RECORDS_IN.labels("mqtt").inc()
        try:
            await self._handle(topic, payload or b"", _user_properties(properties))
        except FluxgateError as exc:
            log.error("message.lost_for_now", topic=topic, error=str(exc))
            self._fail(exc)
            raise  # no ack: the broker redelivers to the next session
        finally:
            self._valve.left()
        metrics.ACK_LATENCY.observe(time.monotonic() - started)
        return 0

    async def _handle(self, topic: str, payload: bytes, user_properties: dict[str, str]) -> None:
        try:
            records = self._converter.convert(topic, payload, user_properties, int(time.time() * 1000))
        except REJECTED as exc:
            log.info("message.dead_lettered", topic=topic, reason=str(exc))
            await self._dead_letters.send(payload, error=exc, source=topic, headers=_headers(user_properties))
            return
        pending = [await self._producer.send(r.topic, r.value, key=r.key, headers=r.headers) for r in records]
        try:
            for record, future in zip(records, pending, strict=True):
                await future
                core_metrics.RECORDS_OUT.labels(record.topic).inc()
        except DeliveryError as exc:
            if exc.retriable:
                raise
            log.warning("message.rejected_by_kafka", topic=topic, reason=str(exc))
            await self._dead_letters.send(payload, error=exc, source=topic, headers=_headers(user_properties))


def _user_properties(properties: Any) -> dict[str, str]:
    """MQTT 5 user properties (gmqtt gives a list of key/value pairs) as a dict."""
    pairs = (properties or {}).get("user_property") or []
    return {str(key): str(value) for key, value in pairs}


def _headers(user_properties: dict[str, str]) -> list[tuple[str, bytes]]:
    return [(key, value.encode()) for key, value in user_properties.items()]
