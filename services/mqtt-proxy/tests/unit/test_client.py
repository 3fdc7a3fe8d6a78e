from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from gmqtt.mqtt.constants import MQTTCommands, MQTTv50, MQTTv311
from gmqtt.mqtt.package import CommandWithMidPacket

from fluxgate_mqtt_proxy.client import ProxyClient, SocketValve, make_client, subscription, tls_context
from fluxgate_mqtt_proxy.settings import MqttSettings


def mqtt(**fields: object) -> MqttSettings:
    return MqttSettings(**fields)


@dataclass
class FakeTransport:
    paused: bool = False
    closing: bool = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.closing


@dataclass
class FakeConnection:
    _transport: FakeTransport


@dataclass
class FakeClient:
    _connection: FakeConnection


def valve_with(transport: FakeTransport, high: int = 4) -> tuple[SocketValve, FakeClient]:
    client = FakeClient(FakeConnection(transport))
    return SocketValve(client, high), client


def test_valve_pauses_at_the_bound_and_resumes_at_half() -> None:
    transport = FakeTransport()
    valve, _ = valve_with(transport, high=4)
    for _ in range(3):
        valve.entered()
    assert not transport.paused
    valve.entered()
    assert transport.paused and valve.pending == 4
    valve.left()
    assert transport.paused  # 3 pending: still above the low mark
    valve.left()
    assert not transport.paused


def test_valve_idle_event_follows_pending() -> None:
    valve, _ = valve_with(FakeTransport())
    assert valve.idle.is_set()
    valve.entered()
    assert not valve.idle.is_set()
    valve.left()
    assert valve.idle.is_set()


def test_held_valve_never_resumes() -> None:
    transport = FakeTransport()
    valve, _ = valve_with(transport)
    valve.entered()
    valve.hold()
    valve.left()
    assert transport.paused


def test_valve_pauses_the_new_transport_after_a_reconnect() -> None:
    old = FakeTransport()
    valve, client = valve_with(old, high=1)
    valve.entered()
    assert old.paused
    old.closing = True
    new = FakeTransport()
    client._connection = FakeConnection(new)
    valve.entered()
    assert new.paused


async def test_reconnect_delay_grows_exponentially_with_jitter_and_resets() -> None:
    client = ProxyClient(mqtt(reconnect_initial_s=1.0, reconnect_max_s=8.0))
    delays = []
    for _ in range(6):
        await client.reconnect(delay=True)  # not active yet: gmqtt only sets up the delay and returns
        delays.append(client.reconnect_delay)
    for delay, ceiling in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    client.connected()
    await client.reconnect(delay=True)
    assert client.reconnect_delay <= 1.0


def test_client_is_persistent_and_acknowledges_only_when_told() -> None:
    settings = mqtt(client_id="proxy-1", session_expiry_s=3600, receive_maximum=50, username="u", password="p")
    client = make_client(settings)
    assert client._client_id == "proxy-1"
    assert client._clean_session is False
    assert client._package_handler._optimistic_acknowledgement is False
    assert client._connect_properties == {"session_expiry_interval": 3600, "receive_maximum": 50}
    assert (client._username, client._password) == (b"u", b"p")


def test_mqtt_311_client_sends_no_v5_properties() -> None:
    client = make_client(mqtt(protocol_version=4))
    assert client._connect_properties == {}
    assert client._package_handler._optimistic_acknowledgement is False


def test_retain_handling_only_for_mqtt5() -> None:
    assert subscription("a/+", 1, 5).retain_handling_options == 1
    assert subscription("a/+", 1, 4).retain_handling_options == 0
    assert subscription("a/+", 2, 4).qos == 2


def test_tls_context(tmp_path: Path) -> None:
    assert tls_context(mqtt()) is False
    context = tls_context(mqtt(tls=True, tls_insecure=True))
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    verified = tls_context(mqtt(tls=True))
    assert isinstance(verified, ssl.SSLContext) and verified.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(FileNotFoundError):
        tls_context(mqtt(tls=True, ca_file=str(tmp_path / "missing.pem")))


class RecordingConnection:
    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    def subscribe(self, subscriptions: list[object], **kwargs: object) -> int:
        self.sent.append([s.topic for s in subscriptions])  # type: ignore[attr-defined]
        return len(self.sent)


def test_resubscribing_after_a_reconnect_does_not_pile_up_subscriptions() -> None:
    client = make_client(mqtt())
    connection = RecordingConnection()
    client._connection = connection
    wanted = [subscription("a/+", 1, 5), subscription("$share/g/b/#", 2, 5)]
    client.subscribe_all(wanted)
    client.subscribe_all([subscription("a/+", 1, 5), subscription("$share/g/b/#", 2, 5)])
    assert [s.topic for s in client.subscriptions] == ["a/+", "$share/g/b/#"]
    assert connection.sent == [["a/+", "$share/g/b/#"], ["a/+"], ["$share/g/b/#"]]


@dataclass
class FakeProtocol:
    proto_ver: int


@dataclass
class WritingConnection:
    """What ProxyClient writes its acknowledgements to: gmqtt's live connection."""

    _protocol: FakeProtocol
    written: list[bytes] = field(default_factory=list)
    closing: bool = False

    def send_package(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing


def connected_client(version: int) -> tuple[ProxyClient, WritingConnection]:
    client = make_client(mqtt(protocol_version=5 if version == MQTTv50 else 4))
    connection = WritingConnection(FakeProtocol(version))
    client._connection = connection
    return client, connection


@pytest.mark.parametrize("version", [MQTTv50, MQTTv311])
async def test_batched_acknowledgements_are_gmqtts_bytes_in_order_in_one_write(version: int) -> None:
    client, connection = connected_client(version)
    client.acknowledge([(1, 7), (2, 8), (1, 65535)])
    client._send_command_with_mid(int(MQTTCommands.PUBCOMP), 9, False)  # gmqtt's own, in the same write
    client.acknowledge([(1, 10)])
    assert connection.written == []  # written at the end of the loop turn
    await asyncio.sleep(0)
    commands = [(MQTTCommands.PUBACK, 7), (MQTTCommands.PUBREC, 8), (MQTTCommands.PUBACK, 65535)]
    commands += [(MQTTCommands.PUBCOMP, 9), (MQTTCommands.PUBACK, 10)]
    build = CommandWithMidPacket.build_package
    expected = b"".join(build(int(cmd), mid, False, reason_code=0, proto_ver=version) for cmd, mid in commands)
    assert connection.written == [expected]


async def test_acknowledgements_for_a_lost_connection_are_dropped() -> None:
    client, lost = connected_client(MQTTv50)
    client.acknowledge([(1, 7)])
    client._connection = WritingConnection(FakeProtocol(MQTTv50))  # reconnected before the write
    await asyncio.sleep(0)
    assert lost.written == [] and client._connection.written == []
    client.acknowledge([])  # nothing to send: nothing written, no empty write
    await asyncio.sleep(0)
    assert client._connection.written == []


def test_a_certificate_refused_in_the_handshake_names_the_setting_and_a_reset_does_not() -> None:
    from fluxgate_mqtt_proxy.service import tls_refusal

    unverified = ssl.SSLCertVerificationError(1, "certificate verify failed")
    unverified.verify_message = "self-signed certificate in certificate chain"
    refused = tls_refusal(unverified)
    assert refused is not None and "[env FLUXGATE_MQTT_MQTT__CA_FILE]" in str(refused)
    alert = ssl.SSLError(1, "sslv3 alert bad certificate")
    alert.reason = "SSLV3_ALERT_BAD_CERTIFICATE"
    refused = tls_refusal(alert)
    assert refused is not None and "FLUXGATE_MQTT_MQTT__CERT_FILE" in str(refused)
    assert tls_refusal(ConnectionResetError(104, "reset")) is None
    assert tls_refusal(TimeoutError()) is None


def test_tls_files_without_tls_are_refused_as_they_would_go_unread() -> None:
    """A CA (or a client certificate) given without MQTT__TLS connected in plain text, the
    files unread: a broker's TLS listener then answered 'wrong version number' at every try."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="ca_file, cert_file, key_file set but tls is false"):
        mqtt(ca_file="ca.pem", cert_file="client.pem", key_file="client.key")
    assert mqtt(tls=True, ca_file="ca.pem").ca_file == "ca.pem"
