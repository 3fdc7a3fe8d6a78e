"""A whole simulation: N MQTT devices and M CoAP devices ticking at a rate, with faults."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from fluxgate_sim.coap import CoapDeviceServer, CoapPsk
from fluxgate_sim.encoding import CoapFormat, coap_payload, json_object, malformed
from fluxgate_sim.faults import Device, Emission, Faults
from fluxgate_sim.mqtt import MqttAccess, MqttFleet, reading_topic, senml_topic
from fluxgate_sim.signals import METRICS


@dataclass(frozen=True)
class SimulationConfig:
    """Everything a run needs; the CLI's options map one to one onto these fields."""

    mqtt_devices: int = 0
    coap_devices: int = 0
    rate: float = 1.0
    count: int | None = None
    duration: float | None = None
    metrics: tuple[str, ...] = METRICS
    faults: Faults = field(default_factory=Faults)
    seed: int | None = None
    day_seconds: float = 86_400.0
    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = 1883
    mqtt_qos: int = 1
    mqtt_connections: int = 1
    mqtt_senml: bool = False
    coap_host: str = "127.0.0.1"
    coap_port: int = 5683
    coap_format: CoapFormat = "json"
    device_prefix: str = ""
    mqtt_root: str = "sensors"
    ledger: Path | None = None
    mqtt_access: MqttAccess = field(default_factory=MqttAccess)
    coap_psk: CoapPsk | None = None  # CoAP over DTLS with this pre-shared key

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("rate must be positive")
        if self.mqtt_devices < 0 or self.coap_devices < 0:
            raise ValueError("device counts must not be negative")
        unknown = set(self.metrics) - set(METRICS)
        if unknown or not self.metrics:
            raise ValueError(f"metrics must be among {', '.join(METRICS)}; got {', '.join(self.metrics)}")


def mqtt_device_names(config: SimulationConfig) -> list[str]:
    return [f"{config.device_prefix}mqtt-{index:04d}" for index in range(1, config.mqtt_devices + 1)]


def coap_device_names(config: SimulationConfig) -> list[str]:
    return [f"{config.device_prefix}coap-{index:04d}" for index in range(1, config.coap_devices + 1)]


class Ledger:
    """Every emission as sent, one JSON line each, for a check that must not trust the
    pipeline's own account: protocol, source (MQTT topic or CoAP path), device, metric,
    event time, value, sequence, kind, the wall-clock time it was sent and, for a broken
    payload, its bytes (hex), so a dead letter can be matched to it."""

    def __init__(self, path: Path | None) -> None:
        self._file: IO[str] | None = path.open("a", encoding="utf-8") if path is not None else None

    def write(self, protocol: str, source: str, emission: Emission, payload: bytes | None = None) -> None:
        if self._file is None:
            return
        reading = emission.reading
        entry: dict[str, object] = {
            "p": protocol, "src": source, "d": reading.device, "m": reading.metric, "t": reading.timestamp_ms,
            "v": reading.value, "s": reading.seq, "k": emission.kind, "w": int(time.time() * 1000),
        }  # fmt: skip
        if payload is not None:
            entry["bad"] = payload.hex()
        self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class Simulation:
    """Runs the devices until ``count`` ticks, ``duration`` seconds, or the stop event."""

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        make = self._device
        self.mqtt = [make(name) for name in mqtt_device_names(config)]
        self.coap = [make(name) for name in coap_device_names(config)]
        self.stats: Counter[str] = Counter()
        self.ledger = Ledger(config.ledger)
        self.coap_server = CoapDeviceServer(config.coap_host, config.coap_port, config.coap_format, config.coap_psk)
        for device in self.coap:
            self.coap_server.add_device(device.name, config.metrics)

    async def run(self, stop: asyncio.Event | None = None) -> Counter[str]:
        """Emit until done; returns how many emissions of each kind were sent."""
        stop = stop or asyncio.Event()
        fleet = MqttFleet(self.config.mqtt_host, self.config.mqtt_port, qos=self.config.mqtt_qos,
                          connections=self.config.mqtt_connections, root=self.config.mqtt_root,
                          access=self.config.mqtt_access) if self.mqtt else None  # fmt: skip
        if fleet is not None:
            await fleet.start()
        if self.coap:
            await self.coap_server.start()
        try:
            await self._loop(fleet, stop)
            await self._send_flush(fleet)
        finally:
            if fleet is not None:
                await fleet.stop()
            await self.coap_server.stop()
            self.ledger.close()
        return self.stats

    async def _loop(self, fleet: MqttFleet | None, stop: asyncio.Event) -> None:
        interval = 1.0 / self.config.rate
        started = time.monotonic()
        tick = 0
        while not self._done(tick, started, stop):
            await self._send_tick(fleet, time.monotonic() - started)
            tick += 1
            # Pace against the start time, not the previous tick, so the rate does not drift.
            delay = started + tick * interval - time.monotonic()
            if delay > 0 and not self._done(tick, started, stop):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await stop.wait()

    def _done(self, tick: int, started: float, stop: asyncio.Event) -> bool:
        config = self.config
        if stop.is_set() or (config.count is not None and tick >= config.count):
            return True
        return config.duration is not None and time.monotonic() - started >= config.duration

    async def _send_tick(self, fleet: MqttFleet | None, elapsed_s: float) -> None:
        now_ms = int(time.time() * 1000)
        for index, device in enumerate(self.mqtt):
            self._send_mqtt(fleet, index, device.tick(elapsed_s, now_ms))
        for device in self.coap:
            await self._send_coap(device.tick(elapsed_s, now_ms))
        self.ledger.flush()  # a tick at a time: what a killed run sent is on disk up to its last tick

    async def _send_flush(self, fleet: MqttFleet | None) -> None:
        for index, device in enumerate(self.mqtt):
            self._send_mqtt(fleet, index, device.flush())
        for device in self.coap:
            await self._send_coap(device.flush())

    def _send_mqtt(self, fleet: MqttFleet | None, index: int, emissions: list[Emission]) -> None:
        assert fleet is not None
        send_mqtt(fleet, index, emissions, self.ledger, self.stats, self._rng, senml=self.config.mqtt_senml)

    async def _send_coap(self, emissions: list[Emission]) -> None:
        await send_coap(self.coap_server, emissions, self.ledger, self.stats, self._rng)

    def _device(self, name: str) -> Device:
        config = self.config
        return Device(name, config.metrics, self._rng, config.faults, config.day_seconds)


def send_mqtt(
    fleet: MqttFleet,
    index: int,
    emissions: list[Emission],
    ledger: Ledger,
    stats: Counter[str],
    rng: random.Random,
    *,
    senml: bool = False,
) -> None:
    """Publish one device's emissions through connection ``index % connections``, counting
    each kind in ``stats`` and writing each to the ledger as it was sent."""
    good = [emission.reading for emission in emissions if not emission.malformed]
    for emission in emissions:
        stats[emission.kind] += 1
        topic = reading_topic(emission.reading.device, emission.reading.metric, fleet.root)
        if emission.malformed:
            payload = malformed(json_object(emission.reading), emission.reading, "json", rng)
            fleet.publish_reading(index, emission.reading, payload)
            ledger.write("mqtt", topic, emission, payload)
        elif not senml:
            fleet.publish_reading(index, emission.reading)
            ledger.write("mqtt", topic, emission)
        else:
            ledger.write("mqtt", senml_topic(emission.reading.device), emission)
    if senml and good:
        fleet.publish_senml(index, good)


async def send_coap(
    server: CoapDeviceServer, emissions: list[Emission], ledger: Ledger, stats: Counter[str], rng: random.Random
) -> None:
    """Serve one device's emissions from its resources, each notified on its own, counting
    each kind in ``stats`` and writing each to the ledger as it was sent."""
    fmt = server.content_format
    for emission in emissions:
        stats[emission.kind] += 1
        payload = coap_payload(emission.reading, fmt)
        if emission.malformed:
            payload = malformed(payload, emission.reading, fmt, rng)
        server.publish(emission.reading.device, emission.reading.metric, payload)
        path = f"/sensors/{emission.reading.device}/{emission.reading.metric}"
        ledger.write("coap", path, emission, payload if emission.malformed else None)
        # aiocoap coalesces updates of one resource made in the same loop turn (observe
        # sends state, not events); yielding lets each one go out as its own notification.
        await asyncio.sleep(0)
