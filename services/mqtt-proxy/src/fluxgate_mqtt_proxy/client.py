"""The gmqtt client, set up for at-least-once delivery.

``optimistic_acknowledgement=False`` makes gmqtt send PUBACK/PUBREC only when our
coroutine handler returns, which is after Kafka confirmed the message's records. gmqtt
reconnects by itself with a fixed delay; :class:`Backoff` turns that into an
exponential one. gmqtt runs each message's handler as its own task, so nothing bounds
how many are pending; :class:`SocketValve` pauses reading from the broker's socket when
too many are, which is the only backpressure QoS 0 has.
"""

from __future__ import annotations

import ssl
from typing import Any

from gmqtt import Client
from gmqtt.mqtt.constants import UNLIMITED_RECONNECTS

from fluxgate_mqtt_proxy import metrics
from fluxgate_mqtt_proxy.settings import MqttSettings


def make_client(settings: MqttSettings) -> Client:
    properties: dict[str, Any] = {}
    if settings.protocol_version == 5:
        properties = {"session_expiry_interval": settings.session_expiry_s, "receive_maximum": settings.receive_maximum}
    client = Client(
        settings.client_id, clean_session=settings.clean_start, optimistic_acknowledgement=False, **properties
    )
    if settings.username:
        password = settings.password.get_secret_value() if settings.password else None
        client.set_auth_credentials(settings.username, password)
    client.set_config({"reconnect_retries": UNLIMITED_RECONNECTS, "reconnect_delay": settings.reconnect_initial_s})
    return client


def tls_context(settings: MqttSettings) -> ssl.SSLContext | bool:
    if not settings.tls:
        return False
    context = ssl.create_default_context(cafile=settings.ca_file)
    if settings.cert_file:
        context.load_cert_chain(settings.cert_file, settings.key_file)
    if settings.tls_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class Backoff:
    """Doubles gmqtt's reconnect delay on every lost connection, resets it on connect."""

    def __init__(self, client: Client, initial: float, maximum: float) -> None:
        self._client, self._initial, self._maximum = client, initial, maximum

    def connected(self) -> None:
        self._client.reconnect_delay = self._initial

    def disconnected(self) -> None:
        self._client.reconnect_delay = min(self._client.reconnect_delay * 2, self._maximum)


class SocketValve:
    """Pauses reading the broker's socket above ``high`` pending messages, resumes at half."""

    def __init__(self, client: Client, high: int) -> None:
        self._client, self._high, self._low = client, high, max(high // 2, 1)
        self.pending = 0
        self._paused: Any = None

    def entered(self) -> None:
        self.pending += 1
        metrics.PENDING.set(self.pending)
        if self.pending >= self._high and self._paused is None:
            self.pause()

    def left(self) -> None:
        self.pending -= 1
        metrics.PENDING.set(self.pending)
        if self.pending <= self._low and self._paused is not None:
            self.resume()

    def pause(self) -> None:
        transport = self._transport()
        if transport is not None and self._paused is None:
            transport.pause_reading()
            self._paused = transport
            metrics.READING_PAUSED.inc()

    def resume(self) -> None:
        transport, self._paused = self._paused, None
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def _transport(self) -> Any:
        # gmqtt exposes no flow control; its connection keeps the asyncio transport here.
        connection = getattr(self._client, "_connection", None)
        return getattr(connection, "_transport", None)
