"""What the proxy borrows from gmqtt's private code (pinned `gmqtt>=0.8,<0.9` in pyproject.toml),
checked against the installed release: a new gmqtt that renames or changes any of it fails
here, naming what changed and where the proxy relies on it, not in production.

* ``client.py: route_publishes`` replaces ``MqttPackageHandler._handle_publish_packet`` and
  ``_handle_qos_{1,2}_publish_packet`` and acknowledges through ``_send_puback``/``_send_pubrec``:
  gmqtt acknowledges before the application has the message (see the README's upstream issue);
* ``client.py: ProxyClient._send_command_with_mid`` batches acknowledgements, reading the live
  connection (``Client._connection``, its ``_protocol.proto_ver``, ``send_package``, ``is_closing``);
* ``client.py: SocketValve`` pauses reading through the connection's ``_transport``;
* ``ProxyClient.reconnect(delay)`` sets a jittered ``reconnect_delay``.
"""

from __future__ import annotations

import inspect
import struct
from types import SimpleNamespace
from typing import Any

import gmqtt
from gmqtt.mqtt.connection import MQTTConnection
from gmqtt.mqtt.constants import MQTTv311
from gmqtt.mqtt.handler import MqttPackageHandler

WHERE = "services/mqtt-proxy/src/fluxgate_mqtt_proxy/client.py"


def has(owner: Any, name: str, why: str) -> None:
    assert hasattr(owner, name), f"gmqtt {gmqtt.__version__}: {owner.__name__}.{name} is gone; {WHERE} {why}"


def params(function: Any) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def test_the_private_names_the_proxy_uses_are_there() -> None:
    for name in ("_handle_publish_packet", "_handle_qos_1_publish_packet", "_handle_qos_2_publish_packet"):
        has(MqttPackageHandler, name, "replaces it to receive each PUBLISH as a plain call")
    for name in ("_send_puback", "_send_pubrec", "_parse_properties"):
        has(MqttPackageHandler, name, "acknowledges through it once Kafka has the record")
    has(gmqtt.Client, "_send_command_with_mid", "overrides it to write acknowledgements once per loop turn")
    for name in ("send_package", "is_closing"):
        has(MQTTConnection, name, "writes the batched acknowledgements through it")
    client = gmqtt.Client("fluxgate-guard")
    for name in ("_connection", "_package_handler"):
        assert hasattr(client, name), f"gmqtt {gmqtt.__version__}: Client().{name} is gone; {WHERE} reads it"
    assert params(gmqtt.Client._send_command_with_mid) == ["cmd", "mid", "dup", "reason_code"], WHERE
    assert params(MqttPackageHandler._handle_qos_1_publish_packet) == ["mid", "packet", "print_topic", "properties"]
    assert params(MqttPackageHandler._send_puback)[:1] == ["mid"], WHERE
    assert "delay" in params(gmqtt.Client.reconnect), f"{WHERE}: ProxyClient.reconnect(delay) overrides it"
    init = inspect.getsource(MQTTConnection.__init__)
    assert "self._transport" in init and "self._protocol" in init, f"{WHERE}: the connection's transport and protocol"


def test_gmqtt_hands_a_qos1_publish_to_the_entry_point_the_proxy_replaces() -> None:
    """The behaviour ``route_publishes`` relies on: gmqtt's parser calls
    ``_handle_qos_1_publish_packet(mid, payload, topic, properties)`` for a QoS 1 PUBLISH."""
    handler = gmqtt.Client("fluxgate-guard")._package_handler
    handler._connection_state = SimpleNamespace(protocol_version=MQTTv311)
    seen: list[tuple[Any, ...]] = []
    handler._handle_qos_1_publish_packet = lambda *args: seen.append(args)
    topic, mid, payload = b"devices/d1/temperature", 7, b'{"value": 21.5}'
    packet = struct.pack("!H", len(topic)) + topic + struct.pack("!H", mid) + payload
    MqttPackageHandler._handle_publish_packet(handler, 0x32, packet)  # PUBLISH, QoS 1
    assert len(seen) == 1, f"gmqtt {gmqtt.__version__} no longer calls _handle_qos_1_publish_packet; see {WHERE}"
    got_mid, got_payload, got_topic, _properties = seen[0]
    assert (got_mid, got_payload, got_topic) == (mid, payload, topic.decode()), seen
