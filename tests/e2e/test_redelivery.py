"""A gateway redelivers, the aggregates do not count it twice.

mqtt-proxy is SIGKILLed mid-stream at QoS 1: what it had written to Kafka but not yet
acknowledged, Mosquitto redelivers to the restarted proxy, so Kafka holds copies. The first
proxy reaches Mosquitto through a relay that drops its PUBACKs, so at the kill every record
it wrote is one Mosquitto still holds: copies are certain, not a matter of when the kill
lands (the batching proxy acknowledges within a millisecond of Kafka's confirmation). Each copy
must carry the same identity (device, metric, event time, value, sequence) as the first,
which is what the aggregator's deduplication keys on: the reference aggregation (the one
the Spark tests check the job against, copies included) then counts every reading once.
"""

from __future__ import annotations

import collections
import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from aggregator_reference import distinct_readings, expected_aggregates
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroDecoder

pytestmark = pytest.mark.integration

COUNT = 2000
DEVICES = 5


def test_copies_a_killed_proxy_had_not_acknowledged_count_once(
    stack: Any, registry_client: Any, tmp_path: Path
) -> None:
    topic, prefix = unique_topic("e2e.readings", stack.bootstrap), f"e2e-{uuid.uuid4().hex[:8]}"
    client_id = f"redelivery-{prefix}"
    with PubackDropper(stack.mqtt_host, stack.mqtt_port) as relay:
        first = proxy(stack, topic, prefix, client_id, tmp_path / "proxy-0.log", mqtt_port=relay.port).start()
        publisher = threading.Thread(target=publish, args=(stack, prefix))
        publisher.start()
        # The proxy sends a PUBACK only once Kafka has the reading, so ten PUBACKs held back at
        # the relay are ten readings in Kafka that Mosquitto still holds. Waiting on the proxy's
        # own counter instead raced: it counts before gmqtt has written the PUBACK, and a kill
        # in between left the relay with nothing dropped.
        first.wait_until(lambda: relay.dropped >= 10, "10 PUBACKs held back from Mosquitto")
        assert first.signal(signal.SIGKILL) == -signal.SIGKILL
    publisher.join(timeout=60)  # the rest waits in the proxy's persistent session
    second = proxy(stack, topic, prefix, client_id, tmp_path / "proxy-1.log").start()
    try:
        records = every_sequence(stack, topic, AvroDecoder(registry_client, schema_dict(SENSOR_READING)))
    finally:
        second.kill()

    copies = collections.Counter(record["sequence"] for record in records)
    assert set(copies) == set(range(COUNT)), "lost readings"
    assert len(records) >= COUNT + 10, "Mosquitto did not redeliver what the first proxy wrote"
    distinct = distinct_readings(records)
    assert len(distinct) == COUNT, "a redelivered copy differs from the first in device, time, value or sequence"
    windows = expected_aggregates(records, 10_000, 10_000)
    assert sum(window["count"] for window in windows.values()) == COUNT


def proxy(
    stack: Any, topic: str, prefix: str, client_id: str, log: Path, mqtt_port: int | None = None
) -> ServiceProcess:
    port = free_port()
    route = {"filter": f"{prefix}/+/+", "topic": topic, "device_from": "topic:1", "metric_from": "topic:2", "qos": 1}
    env = {
        "FLUXGATE_MQTT_HTTP__PORT": str(port),
        "FLUXGATE_MQTT_HTTP__HOST": "127.0.0.1",
        "FLUXGATE_MQTT_ROUTES": json.dumps([route]),
        "FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
        "FLUXGATE_MQTT_REGISTRY__URL": stack.registry_url,
        "FLUXGATE_MQTT_MQTT__HOST": stack.mqtt_host,
        "FLUXGATE_MQTT_MQTT__PORT": str(mqtt_port or stack.mqtt_port),
        "FLUXGATE_MQTT_MQTT__CLIENT_ID": client_id,
        "FLUXGATE_MQTT_MQTT__RECONNECT_MAX_S": "2",
        "FLUXGATE_MQTT_MQTT__SESSION_EXPIRY_S": "300",  # a killed proxy's session must not linger for long
    }
    return ServiceProcess(
        [sys.executable, "-m", "fluxgate_mqtt_proxy"],
        env,
        health_port=port,
        log_path=log,
        isolate_prefix="FLUXGATE_MQTT_",
    )


def publish(stack: Any, prefix: str) -> None:
    """Devices with their own clock and sequence numbers, one mosquitto_pub per device."""
    for device in range(DEVICES):
        lines = [
            json.dumps({"sensorId": f"d{device}", "timestamp": 1_767_225_600_000 + seq, "temperature": seq, "seq": seq})
            for seq in range(device, COUNT, DEVICES)
        ]
        subprocess.run(
            ["mosquitto_pub", "-h", stack.mqtt_host, "-p", str(stack.mqtt_port), "-q", "1",
             "-t", f"{prefix}/d{device}/temperature", "-l"],
            input="\n".join(lines) + "\n", text=True, check=True, timeout=60,
        )  # fmt: skip


def every_sequence(stack: Any, topic: str, decoder: AvroDecoder) -> list[dict[str, Any]]:
    """The readings in Kafka, read until every sequence number arrived at least once."""

    def complete(got: list[ConsumedRecord]) -> bool:
        return len({item.record["sequence"] for item in got if item.record}) == COUNT

    got = consume(stack.bootstrap, topic, timeout=90, decoder=decoder, complete=complete)
    return [as_millis(item.record) for item in got if item.record]


def as_millis(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "event_time": int(record["event_time"].timestamp() * 1000)}


class PubackDropper:
    """A TCP relay to the MQTT broker that forwards every packet but the client's PUBACKs."""

    PUBACK = 4

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.dropped = 0
        self._sockets: list[socket.socket] = [self._server]

    def __enter__(self) -> PubackDropper:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._server.accept()
                broker = socket.create_connection(self._target)
                self._sockets += [client, broker]
                threading.Thread(target=self._client_to_broker, args=(client, broker), daemon=True).start()
                threading.Thread(target=_pump, args=(broker, client), daemon=True).start()

    def _client_to_broker(self, client: socket.socket, broker: socket.socket) -> None:
        stream = client.makefile("rb")
        with contextlib.suppress(OSError, ValueError):
            while packet := _mqtt_packet(stream):
                if packet[0] >> 4 == self.PUBACK:
                    self.dropped += 1
                else:
                    broker.sendall(packet)


def _mqtt_packet(stream: Any) -> bytes:
    """One whole MQTT control packet (fixed header, variable length, body), or b"" at the end."""
    first = stream.read(1)
    if not first:
        return b""
    header, length, shift = bytearray(first), 0, 0
    while True:  # the remaining length: a varint of up to four bytes
        byte = stream.read(1)[0]
        header.append(byte)
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return bytes(header) + stream.read(length)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
