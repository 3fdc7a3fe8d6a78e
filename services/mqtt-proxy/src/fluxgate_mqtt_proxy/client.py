"""The gmqtt client, set up for at-least-once delivery.

What gmqtt 0.8 does, read in its source (``gmqtt/mqtt/handler.py``, ``client.py``):

* With ``on_message`` a coroutine function, every message gets its own task and
  PUBACK/PUBREC is written from that task's done-callback, one ``write`` each. The proxy
  takes over instead (:func:`route_publishes`): the packet handler's QoS 1/2 entry points
  hand each parsed PUBLISH, with its packet id, to a plain function, and the proxy sends
  the acknowledgement itself once Kafka has the message (``optimistic_acknowledgement``
  stays False, so gmqtt never acknowledges on its own). :class:`ProxyClient` writes the
  acknowledgements of one event-loop turn (and gmqtt's PUBCOMPs) in one ``write``.
* Nothing bounds how many messages are pending; :class:`SocketValve` pauses reading the
  broker's socket above a bound.
* It reconnects by itself after a lost connection, always with the same fixed delay and
  ``clean_session=False``; :class:`ProxyClient` makes the delay exponential.
* ``subscribe()`` appends to ``client.subscriptions`` on every call, so subscriptions are
  made once and re-sent with ``resubscribe()`` after a reconnect.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from gmqtt import Client, Subscription
from gmqtt.mqtt.constants import UNLIMITED_RECONNECTS, MQTTCommands, MQTTv50, MQTTv311
from gmqtt.mqtt.handler import MqttPackageHandler
from gmqtt.mqtt.package import CommandWithMidPacket

from fluxgate_core.backoff import Backoff
from fluxgate_mqtt_proxy import metrics
from fluxgate_mqtt_proxy.settings import MqttSettings

# MQTT 5 retain handling 1: retained messages only for a new subscription, not again
# on every resubscribe after a reconnect.
RETAIN_ON_NEW_SUBSCRIPTION = 1
# What gmqtt's CommandWithMidPacket builds: command, remaining length, packet id (MQTT 5: reason
# code and an empty property block too).
_V5_ACK = struct.Struct("!BBHBB").pack
_V311_ACK = struct.Struct("!BBH").pack
_COMMAND = {1: int(MQTTCommands.PUBACK), 2: int(MQTTCommands.PUBREC)}


class ProxyClient(Client):  # type: ignore[misc]
    """gmqtt's client with an exponential, jittered reconnect delay (reset by :meth:`connected`)."""

    def __init__(self, settings: MqttSettings, **kwargs: Any) -> None:
        super().__init__(settings.client_id, clean_session=settings.clean_start, **kwargs)
        # Jitter: replicas that lost the same broker do not reconnect in step.
        self._backoff = Backoff.capped(settings.reconnect_initial_s, settings.reconnect_max_s)
        self.set_config({"reconnect_retries": UNLIMITED_RECONNECTS, "reconnect_delay": settings.reconnect_initial_s})
        self._outbox: list[bytes] = []
        self._outbox_connection: Any = None

    @property
    def package_handler(self) -> MqttPackageHandler:
        return self._package_handler

    def _send_command_with_mid(self, cmd: int, mid: int, dup: bool, reason_code: int = 0) -> None:
        # gmqtt's packet handler sends PUBREL/PUBCOMP (and PUBACK/PUBREC when not ours) through
        # here, one write each; collected and written once per event-loop turn, a batch's
        # packets cost one system call, and the broker reads them in one go too.
        version = self._connection._protocol.proto_ver
        self._to_outbox(CommandWithMidPacket.build_package(cmd, mid, dup, reason_code=reason_code, proto_ver=version))

    def acknowledge(self, acks: Sequence[tuple[int, int]]) -> None:
        """PUBACK (QoS 1) or PUBREC (QoS 2) with reason code 0 for each ``(qos, mid)``, in order:
        the bytes gmqtt's own would be, packed in one go, written with the loop turn's others."""
        if not acks:
            return
        if self._connection._protocol.proto_ver == MQTTv50:
            self._to_outbox(b"".join([_V5_ACK(_COMMAND[qos], 4, mid, 0, 0) for qos, mid in acks]))
        else:
            self._to_outbox(b"".join([_V311_ACK(_COMMAND[qos], 2, mid) for qos, mid in acks]))

    def _to_outbox(self, packets: bytes) -> None:
        connection = self._connection
        if connection is not self._outbox_connection:
            self._flush_outbox()
            self._outbox_connection = connection
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._flush_outbox)
        self._outbox.append(packets)

    def _flush_outbox(self) -> None:
        packets, self._outbox = self._outbox, []
        connection = self._outbox_connection
        # Packet ids of a lost connection mean nothing on the next one: what was not written is dropped.
        if packets and connection is self._connection and not connection.is_closing():
            connection.send_package(b"".join(packets))

    async def reconnect(self, delay: bool = False) -> None:
        # gmqtt calls this after a lost connection and again after each failed attempt.
        if delay:
            self.reconnect_delay = self._backoff.next_delay()
        await super().reconnect(delay)

    def connected(self) -> None:
        self._backoff.reset()

    def subscribe_all(self, subscriptions: Sequence[Subscription]) -> None:
        """Subscribe the first time; after a reconnect send the same subscriptions again."""
        if not self.subscriptions:
            self.subscribe(list(subscriptions))
            return
        for subscription in self.subscriptions:
            self.resubscribe(subscription)


Acknowledge = Callable[[Sequence[tuple[int, int]]], None]  # (qos, packet id) pairs, in the order to send them


class PublishReceiver(Protocol):
    """What :func:`route_publishes` wires: a plain function per PUBLISH, and a way to acknowledge."""

    acknowledge: Acknowledge

    def receive(self, topic: str | bytes, payload: bytes, qos: int, properties: Any, mid: int | None) -> None: ...


def route_publishes(
    handler: MqttPackageHandler, receiver: PublishReceiver, acknowledge: Acknowledge | None = None
) -> None:
    """Route every PUBLISH gmqtt parses to ``receiver.receive`` (no task per message), and let
    ``receiver.acknowledge([(qos, mid), ...])`` send their PUBACKs (QoS 1) and PUBRECs (QoS 2)
    in that order: through ``acknowledge`` when given (:meth:`ProxyClient.acknowledge`, a
    batch at once), else one by one through gmqtt's packet handler.

    gmqtt 0.8 parses topic, packet id and properties in ``_handle_publish_packet``, then
    hands QoS 1/2 messages to ``_handle_qos_{1,2}_publish_packet(mid, payload, topic,
    properties)`` and QoS 0 ones to ``on_message(topic, payload, 0, properties)``, which it
    calls directly when it is not a coroutine function.
    """

    def qos0(topic: str | bytes, payload: bytes, qos: int, properties: Any) -> None:
        receiver.receive(topic, payload, qos, properties, None)

    def qos1(mid: int, payload: bytes, topic: str | bytes, properties: Any) -> None:
        receiver.receive(topic, payload, 1, properties, mid)

    def qos2(mid: int, payload: bytes, topic: str | bytes, properties: Any) -> None:
        receiver.receive(topic, payload, 2, properties, mid)

    def one_by_one(acks: Sequence[tuple[int, int]]) -> None:
        for qos, mid in acks:
            if qos == 1:
                handler._send_puback(mid, reason_code=0)
            else:
                handler._send_pubrec(mid, reason_code=0)

    handler.on_message = qos0
    handler._handle_qos_1_publish_packet = qos1
    handler._handle_qos_2_publish_packet = qos2
    handler._handle_publish_packet = _plain_publish_first(handler, receiver, handler._handle_publish_packet)
    receiver.acknowledge = acknowledge or one_by_one


def _plain_publish_first(
    handler: MqttPackageHandler, receiver: PublishReceiver, gmqtt_parse: Callable[[int, bytes], None]
) -> Callable[[int, bytes], None]:
    """A PUBLISH without properties (what devices mostly send) parsed in a few slices; anything
    else (properties, a topic alias, an empty or non-UTF-8 topic, a malformed packet) goes
    through gmqtt's own parser, which then calls the entry points above."""

    def parse(cmd: int, packet: bytes) -> None:
        qos = (cmd & 0x06) >> 1
        try:
            end = 2 + (packet[0] << 8 | packet[1])
            mid = packet[end] << 8 | packet[end + 1] if qos else None
            start = end + 2 if qos else end
            if handler._connection_state.protocol_version >= MQTTv50:
                if packet[start] != 0:
                    gmqtt_parse(cmd, packet)
                    return
                start += 1
            topic = packet[2:end].decode()
        except (IndexError, UnicodeDecodeError):
            gmqtt_parse(cmd, packet)
            return
        if not topic or qos > 2 or start > len(packet):
            gmqtt_parse(cmd, packet)
            return
        receiver.receive(topic, packet[start:], qos, None, mid)

    return parse


def make_client(settings: MqttSettings) -> ProxyClient:
    properties: dict[str, Any] = {}
    if settings.protocol_version == 5:
        properties = {"session_expiry_interval": settings.session_expiry_s, "receive_maximum": settings.receive_maximum}
    client = ProxyClient(settings, optimistic_acknowledgement=False, **properties)
    if settings.username:
        password = settings.password.get_secret_value() if settings.password else None
        client.set_auth_credentials(settings.username, password)
    return client


def subscription(topic_filter: str, qos: int, protocol_version: int) -> Subscription:
    # MQTT 3.1.1 reserves the option bits that MQTT 5 uses for retain handling.
    handling = RETAIN_ON_NEW_SUBSCRIPTION if protocol_version == 5 else 0
    return Subscription(topic_filter, qos=qos, retain_handling_options=handling)


def protocol_version(settings: MqttSettings) -> int:
    return int(MQTTv50 if settings.protocol_version == 5 else MQTTv311)


def tls_context(settings: MqttSettings) -> ssl.SSLContext | bool:
    """The SSL context gmqtt's ``connect(ssl=...)`` takes, or False for plain TCP."""
    if not settings.tls:
        return False
    context = ssl.create_default_context(cafile=settings.ca_file)
    if settings.cert_file:
        context.load_cert_chain(settings.cert_file, settings.key_file)
    if settings.tls_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class SocketValve:
    """Pauses reading the broker's socket at ``high`` pending messages, resumes at half of it.

    The bound that QoS 0 needs (the broker's receive maximum bounds only QoS 1/2): while
    paused, TCP flow control pushes back on the broker, which queues or drops by its own
    QoS 0 policy. Pending counts messages whose handler started; packets already read
    into gmqtt's 64 KiB buffer still get handled, so the real bound is ``high`` plus that.
    """

    def __init__(self, client: Client, high: int) -> None:
        self._client = client
        self._high = high
        self._low = max(high // 2, 1)
        self.pending = 0
        self._paused: Any = None
        self._held = False
        self.idle = asyncio.Event()
        self.idle.set()

    def entered(self, count: int = 1) -> None:
        self.pending += count
        self.idle.clear()
        metrics.PENDING.set(self.pending)
        if self.pending >= self._high:
            self.pause()

    def left(self, count: int = 1) -> None:
        self.pending -= count
        if not self.pending:
            self.idle.set()
        metrics.PENDING.set(self.pending)
        if self.pending <= self._low and not self._held:
            self.resume()

    def hold(self) -> None:
        """Stop reading for good (shutdown): what the broker still has waits for the next session."""
        self._held = True
        self.pause()

    def pause(self) -> None:
        transport = self._transport()
        # A reconnect brings a new transport: the one paused before is gone with its socket.
        if transport is None or transport is self._paused or transport.is_closing():
            return
        transport.pause_reading()
        self._paused = transport
        metrics.READ_PAUSES.inc()

    def resume(self) -> None:
        transport, self._paused = self._paused, None
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def _transport(self) -> Any:
        # gmqtt has no flow control of its own; its live connection holds the asyncio transport.
        connection = getattr(self._client, "_connection", None)
        return getattr(connection, "_transport", None)
