"""Simulated MQTT devices publishing through a few shared connections.

Thousands of simulated devices do not need thousands of TCP sessions to exercise the
gateway: what the gateway sees is topics and payloads. Devices are spread round-robin
over ``connections`` gmqtt clients (one by default), which keeps the simulator cheap
enough to outrun the pipeline it is testing.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gmqtt import Client
from gmqtt.mqtt.constants import MQTTv311

from fluxgate_sim.encoding import json_object, senml_json
from fluxgate_sim.faults import Reading


def reading_topic(device: str, metric: str, root: str = "sensors") -> str:
    return f"{root}/{device}/{metric}"


def senml_topic(device: str) -> str:
    return f"devices/{device}/senml"


@dataclass(frozen=True)
class MqttAccess:
    """How the devices log in to a broker that wants TLS (``ca_file``), a client certificate
    (``cert_file``/``key_file``) and a password (``username``, ``password_file``)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("--mqtt-cert-file and --mqtt-key-file go together")
        if self.cert_file is not None and self.ca_file is None:
            raise ValueError("--mqtt-cert-file needs --mqtt-ca-file (a client certificate is sent over TLS)")
        if (self.username is None) != (self.password_file is None):
            raise ValueError("--mqtt-username and --mqtt-password-file go together")

    def tls(self) -> ssl.SSLContext | None:
        if self.ca_file is None:
            return None
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(str(self.cert_file), str(self.key_file))
        return context

    def credentials(self) -> tuple[str, str] | None:
        if self.username is None or self.password_file is None:
            return None
        return self.username, self.password_file.read_text().rstrip("\r\n")


class MqttFleet:
    """Publishes for many devices over ``connections`` shared MQTT connections."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 1883,
        *,
        qos: int = 1,
        connections: int = 1,
        root: str = "sensors",
        access: MqttAccess | None = None,
    ) -> None:
        if qos not in (0, 1, 2):
            raise ValueError(f"QoS must be 0, 1 or 2, got {qos}")
        if connections < 1:
            raise ValueError("need at least one connection")
        self.host = host
        self.port = port
        self.qos = qos
        self.root = root  # first topic level of the per-metric topics: a soak run's own namespace
        prefix = f"fluxgate-sim-{uuid.uuid4().hex[:8]}"
        self._clients = [Client(f"{prefix}-{index}") for index in range(connections)]
        self.access = access or MqttAccess()
        self.published = 0

    async def start(self) -> MqttFleet:
        tls, credentials = self.access.tls(), self.access.credentials()
        for client in self._clients:
            if credentials is not None:
                client.set_auth_credentials(*credentials)
        # MQTT 3.1.1 keeps the simulated devices usable with any broker the gateway may face.
        connecting = (
            client.connect(self.host, self.port, ssl=tls or False, version=MQTTv311) for client in self._clients
        )
        await asyncio.gather(*connecting)
        return self

    async def stop(self, timeout: float = 10.0) -> None:
        """Wait (bounded) for QoS 1/2 acknowledgements, then disconnect."""
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(self._drained(client) for client in self._clients))
        await asyncio.gather(*(client.disconnect() for client in self._clients if client.is_connected))

    async def __aenter__(self) -> MqttFleet:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def publish(self, device_index: int, topic: str, payload: bytes) -> None:
        """Publish one payload on behalf of device number ``device_index``."""
        self._clients[device_index % len(self._clients)].publish(topic, payload, qos=self.qos)
        self.published += 1

    def publish_reading(self, device_index: int, reading: Reading, payload: bytes | None = None) -> None:
        """``<root>/<device>/<metric>`` with the JSON object (or ``payload`` when given)."""
        body = payload if payload is not None else json_object(reading)
        self.publish(device_index, reading_topic(reading.device, reading.metric, self.root), body)

    def publish_senml(self, device_index: int, readings: Sequence[Reading]) -> None:
        """``devices/<device>/senml`` with one SenML pack of the device's readings."""
        self.publish(device_index, senml_topic(readings[0].device), senml_json(readings))

    @staticmethod
    async def _drained(client: Client) -> None:
        # gmqtt keeps unacknowledged QoS>0 messages in its persistent storage until PUBACK/PUBCOMP.
        await client._persistent_storage.wait_empty()
