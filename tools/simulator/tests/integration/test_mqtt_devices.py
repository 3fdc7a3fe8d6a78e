"""Simulated MQTT devices publish well-formed readings to the real Mosquitto."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from gmqtt import Client

from fluxgate_sim.faults import Faults
from fluxgate_sim.runner import Simulation, SimulationConfig

pytestmark = pytest.mark.integration


class Subscriber:
    """Collects the messages of devices named ``prefix...`` until ``expected`` arrived."""

    def __init__(self, expected: int, prefix: str) -> None:
        self.prefix = prefix
        self.messages: list[tuple[str, bytes]] = []
        self.expected = expected
        self.enough = asyncio.Event()
        self.subscribed = asyncio.Event()
        self.client = Client(f"sim-test-{uuid.uuid4().hex[:8]}")
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *args: self.subscribed.set()

    def _on_message(self, client: Any, topic: str, payload: bytes, qos: int, properties: Any) -> int:
        # MQTT wildcards match whole levels only, so filter this test's devices here.
        if topic.split("/")[1].startswith(self.prefix):
            self.messages.append((topic, payload))
        if len(self.messages) >= self.expected:
            self.enough.set()
        return 0

    async def start(self, host: str, port: int, topic: str) -> None:
        await self.client.connect(host, port)
        self.client.subscribe(topic, qos=1)
        await asyncio.wait_for(self.subscribed.wait(), 10)


@pytest.mark.parametrize("qos", [0, 1])
async def test_mqtt_devices_publish_well_formed_json(stack: Any, qos: int) -> None:
    prefix = f"t{uuid.uuid4().hex[:6]}-"
    config = SimulationConfig(
        mqtt_devices=3, count=4, rate=50.0, seed=7, device_prefix=prefix, mqtt_qos=qos,
        mqtt_host=stack.mqtt_host, mqtt_port=stack.mqtt_port,
    )  # fmt: skip
    subscriber = Subscriber(expected=3 * 4 * 3, prefix=prefix)
    await subscriber.start(stack.mqtt_host, stack.mqtt_port, "sensors/+/+")
    try:
        stats = await Simulation(config).run()
        await asyncio.wait_for(subscriber.enough.wait(), 20)
    finally:
        await subscriber.client.disconnect()
    assert stats == {"ok": 36}
    assert len(subscriber.messages) == 36
    seen: set[tuple[str, str, int]] = set()
    for topic, payload in subscriber.messages:
        _, device, metric = topic.split("/")
        document = json.loads(payload)
        assert set(document) == {"sensorId", "timestamp", metric, "seq"}
        assert document["sensorId"] == device and device.startswith(prefix)
        assert isinstance(document[metric], float | int) and isinstance(document["timestamp"], int)
        seen.add((device, metric, document["seq"]))
    assert len(seen) == 36  # no message twice, none missing
    assert {metric for _, metric, _ in seen} == {"temperature", "humidity", "brightness"}


async def test_mqtt_faults_reach_the_broker(stack: Any) -> None:
    prefix = f"t{uuid.uuid4().hex[:6]}-"
    faults = Faults(malformed=0.3, duplicates=0.2)
    config = SimulationConfig(
        mqtt_devices=2, count=20, rate=200.0, seed=11, device_prefix=prefix, metrics=("temperature",),
        faults=faults, mqtt_host=stack.mqtt_host, mqtt_port=stack.mqtt_port,
    )  # fmt: skip
    subscriber = Subscriber(expected=10_000, prefix=prefix)
    await subscriber.start(stack.mqtt_host, stack.mqtt_port, "sensors/+/temperature")
    try:
        stats = await Simulation(config).run()
        subscriber.expected = sum(stats.values())
        if len(subscriber.messages) >= subscriber.expected:
            subscriber.enough.set()
        await asyncio.wait_for(subscriber.enough.wait(), 20)
    finally:
        await subscriber.client.disconnect()
    broken = 0
    for _, payload in subscriber.messages:
        try:
            document = json.loads(payload)
            float(document["temperature"])
        except (ValueError, KeyError, TypeError):
            broken += 1
    assert broken == stats["malformed"] > 0
    assert stats["duplicate"] > 0
    assert len(subscriber.messages) == sum(stats.values())


async def test_senml_packs(stack: Any) -> None:
    prefix = f"t{uuid.uuid4().hex[:6]}-"
    config = SimulationConfig(
        mqtt_devices=1, count=2, rate=50.0, seed=1, device_prefix=prefix, mqtt_senml=True,
        mqtt_host=stack.mqtt_host, mqtt_port=stack.mqtt_port,
    )  # fmt: skip
    subscriber = Subscriber(expected=2, prefix=prefix)
    await subscriber.start(stack.mqtt_host, stack.mqtt_port, "devices/+/senml")
    try:
        await Simulation(config).run()
        await asyncio.wait_for(subscriber.enough.wait(), 20)
    finally:
        await subscriber.client.disconnect()
    topic, payload = subscriber.messages[0]
    pack = json.loads(payload)
    assert topic == f"devices/{prefix}mqtt-0001/senml"
    assert pack[0]["bn"] == f"{prefix}mqtt-0001:"
    assert [record["n"] for record in pack] == ["temperature", "humidity", "brightness"]
    assert [record["u"] for record in pack] == ["Cel", "%RH", "lx"]
