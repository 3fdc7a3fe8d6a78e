"""The proxy's lifecycle: register the schema (Avro output), connect, subscribe, and drain on SIGTERM.

Shutdown order: refuse new messages and stop reading the socket, let every message in
hand reach Kafka and be acknowledged, flush the producer, then disconnect without
unsubscribing, so the broker keeps the persistent session and queues what arrives
until a replica with the same client id is back.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import ssl
from typing import Any

import structlog
from gmqtt.mqtt.handler import MQTTConnectError

from fluxgate_core.backoff import Backoff, sleep_unless
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.gateway import open_gateway_output, register_targets
from fluxgate_core.kafka import AsyncProducer
from fluxgate_core.topic_watch import TopicWatch
from fluxgate_mqtt_proxy import metrics
from fluxgate_mqtt_proxy.acks import AckSequencer, quiet_unacknowledged
from fluxgate_mqtt_proxy.client import (
    ProxyClient,
    SocketValve,
    make_client,
    protocol_version,
    route_publishes,
    subscription,
    tls_context,
)
from fluxgate_mqtt_proxy.convert import MessageConverter
from fluxgate_mqtt_proxy.handler import MessageHandler
from fluxgate_mqtt_proxy.settings import SERVICE, ProxySettings
from fluxgate_mqtt_proxy.topic_routes import Route, compile_routes

log = structlog.get_logger(__name__)


# Every message allocates a few dozen short-lived objects, so with Python's default
# (a young-generation collection every 700 allocations) the collector runs every ~25
# messages and costs about a tenth of the CPU. Garbage without cycles is freed at once
# either way; this only lets cycles wait a little longer (a few MB at most).
GC_THRESHOLDS = (50_000, 50, 100)


def tune_gc() -> None:
    """Call once everything long-lived exists: it is set aside (``gc.freeze``), never scanned again."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class BrokerRefused(FluxgateError):
    """The broker refused our CONNECT (bad credentials, not authorised, ...)."""


class MqttProxy:
    """One proxy replica. ``await run(stop)`` returns after a clean drain; ``fatal`` says why it stopped early."""

    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self.routes: list[Route] = compile_routes(settings.routes, settings.mqtt.share_group)
        self.fatal: BaseException | None = None
        self.subscribed = False
        self._producer: AsyncProducer | None = None
        self._watch: TopicWatch | None = None  # a topic deleted while running: not ready
        self._stop = asyncio.Event()
        self._sequencer = AckSequencer()

    def ready(self) -> bool:
        """Every route subscribed on the broker, Kafka reachable, every topic still there."""
        watched = self._watch is None or self._watch.present()
        return self.subscribed and self._producer is not None and self._producer.healthy() and watched

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        mqtt = self.settings.mqtt
        log.info("mqtt-proxy.starting", broker=f"{mqtt.host}:{mqtt.port}", routes=len(self.routes))
        quiet_unacknowledged(asyncio.get_running_loop())
        settings = self.settings
        prefix = str(settings.model_config["env_prefix"])
        output = await open_gateway_output(
            SERVICE,
            settings.kafka,
            settings.registry,
            [route.settings.topic for route in self.routes if not route.dynamic],
            settings.deadletter_topic,
            settings.max_in_flight,
            env_prefix=prefix,
            topics_setting="kcql" if settings.kcql is not None else "routes",
            output=settings.output,
        )
        producer, self._watch = output.producer, output.watch
        self._producer = producer
        client = make_client(settings.mqtt)
        valve = SocketValve(client, settings.max_pending_messages)
        dead_letters = output.dead_letters(DeadLetterWriter, settings.limits)
        register = functools.partial(  # for the topics `$` routes derive: registered, and there or created
            register_targets,
            settings.registry,
            kafka=settings.kafka,
            service=SERVICE,
            env_prefix=prefix,
            output=settings.output,
        )
        limits, derived = settings.limits.payload_limits(), settings.derived_targets()
        converter = MessageConverter(self.routes, output.encoders, limits, register, derived)
        handler = MessageHandler(converter, producer, dead_letters, valve, self._sequencer, self._fail)
        self._wire(client, handler)
        tune_gc()
        try:
            if await self._connect(client):
                await stop.wait()
        finally:
            await self._drain(client, producer, valve, handler)

    def _wire(self, client: ProxyClient, handler: MessageHandler) -> None:
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_subscribe = self._on_subscribe
        # The handler acknowledges once Kafka confirmed, a batch at a time through the client.
        route_publishes(client.package_handler, handler, client.acknowledge)

    def _on_connect(self, client: ProxyClient, session_present: int, rc: int, properties: Any) -> None:
        self._sequencer.new_connection()
        client.connected()
        version = self.settings.mqtt.protocol_version
        # Always (re)subscribe, even when the broker kept our session: it is idempotent, and it
        # brings the routes back when the session was lost (expired, broker without persistence).
        client.subscribe_all([subscription(r.subscription, r.settings.qos, version) for r in self.routes])
        log.info("mqtt.connected", host=self.settings.mqtt.host, session_present=bool(session_present))

    def _on_disconnect(self, client: ProxyClient, packet: Any, exc: Any = None) -> None:
        self._sequencer.new_connection()  # nothing received so far may be acknowledged any more
        self.subscribed = False
        for sub in client.subscriptions:
            sub.acknowledged = False
        metrics.CONNECTED.set(0)
        if not self._stop.is_set():
            metrics.DISCONNECTS.inc()
            log.warning("mqtt.disconnected", retry_in_s=round(client.reconnect_delay, 2))

    def _on_subscribe(self, client: ProxyClient, mid: int, granted: Any, properties: Any) -> None:
        codes = list(granted) if isinstance(granted, tuple | list) else [granted]
        if any(code >= 128 for code in codes):
            log.error("mqtt.subscribe.refused", codes=codes, filters=[s.topic for s in client.subscriptions])
        self.subscribed = bool(client.subscriptions) and all(sub.acknowledged for sub in client.subscriptions)
        metrics.CONNECTED.set(1 if self.subscribed else 0)
        log.info("mqtt.subscribed", granted=codes, ready=self.subscribed)

    async def _connect(self, client: ProxyClient) -> bool:
        """The first connection, retried with backoff (the broker may start after us); False if stopped."""
        mqtt = self.settings.mqtt
        backoff = Backoff.capped(mqtt.reconnect_initial_s, mqtt.reconnect_max_s)
        while not self._stop.is_set():
            try:
                tls, version = tls_context(mqtt), protocol_version(mqtt)
                connect = client.connect(mqtt.host, mqtt.port, ssl=tls, keepalive=mqtt.keepalive_s, version=version)
                async with asyncio.timeout(mqtt.connect_timeout_s):
                    await connect
                return True
            except MQTTConnectError as exc:
                raise BrokerRefused(f"broker {mqtt.host}:{mqtt.port} refused the connection: {exc}") from exc
            except (OSError, TimeoutError) as exc:
                refused = tls_refusal(exc)  # retrying cannot fix a certificate: name the setting instead
                if refused is not None:
                    raise refused from exc
                retry_in_s = round(backoff.ceiling(backoff.attempts), 2)
                log.warning("mqtt.connect.failed", error=str(exc) or type(exc).__name__, retry_in_s=retry_in_s)
            await sleep_unless(self._stop, backoff.next_delay())
        return False

    async def _drain(self, client: ProxyClient, producer: AsyncProducer, valve: SocketValve, handler: Any) -> None:
        handler.close()
        valve.hold()
        if self._watch is not None:
            self._watch.stop()
        try:
            async with asyncio.timeout(self.settings.drain_timeout_s):
                await valve.idle.wait()
        except TimeoutError:
            log.warning("shutdown.drain_timeout", pending=valve.pending)
        await producer.stop()
        try:
            await client.disconnect()
        except Exception as exc:  # never connected, or already gone: the session is the broker's either way
            log.info("mqtt.disconnect.skipped", error=str(exc) or type(exc).__name__)
        log.info("shutdown.drained", unacknowledged=valve.pending)

    def _fail(self, exc: BaseException) -> None:
        """A message could be neither produced nor dead-lettered: stop, leaving it unacknowledged."""
        if self.fatal is None:
            self.fatal = exc
        self._stop.set()


# What a broker's TLS alert in the handshake means for our settings: it refused the certificate
# we sent (or that we sent none), so the fix is ours; anything else (a reset, a timeout) is
# retried. Under TLS 1.3 a broker that wants a certificate says so only after the handshake,
# in an alert gmqtt does not pass on (its connect times out): that case is retried and logged.
CLIENT_CERTIFICATE_REFUSED = frozenset(
    {
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
        "SSLV3_ALERT_BAD_CERTIFICATE",
        "TLSV1_ALERT_UNKNOWN_CA",
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
    }
)


def tls_refusal(exc: BaseException | None) -> ConfigError | None:
    """The setting a failed TLS handshake with the broker names, if retrying cannot help."""
    if not isinstance(exc, ssl.SSLError):
        return None
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ConfigError(
            f"mqtt.ca_file [env FLUXGATE_MQTT_MQTT__CA_FILE]: the broker's certificate does not verify "
            f"against it: {exc.verify_message}"
        )
    if exc.reason in CLIENT_CERTIFICATE_REFUSED:
        return ConfigError(
            "mqtt.cert_file / mqtt.key_file [env FLUXGATE_MQTT_MQTT__CERT_FILE, FLUXGATE_MQTT_MQTT__KEY_FILE]: "
            f"the broker refused the client certificate, or wants one ({exc.reason})"
        )
    return None
