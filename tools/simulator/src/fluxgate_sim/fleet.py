"""Fleet mode: up to millions of devices, each reporting every ``period`` seconds with
jitter, multiplexed over a few MQTT connections as home hubs publish for their sensors.

No device is a Python object. A device's place in the period comes from a seeded affine
permutation of the ids (position ``k`` of every period belongs to device ``(a·k + b) mod N``,
so the N devices sit evenly spaced and the rate is exactly N / period), its report number is
how many periods have passed, and its values are a function of its id and the time. What is
kept: the reports of the next ``2 * jitter * period`` seconds in buckets of 10 ms (8 bytes
each, ``16 * jitter`` bytes a device) and the readings held back to arrive out of order.
The last ``coap_devices`` ids (a bounded share) speak CoAP instead; ``shard`` splits the ids
over processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import resource
import time
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fluxgate_sim.coap import CoapDeviceServer, CoapPsk
from fluxgate_sim.encoding import CoapFormat
from fluxgate_sim.faults import Emission, Faults, Reading, apply_faults, released
from fluxgate_sim.mqtt import MqttAccess, MqttFleet
from fluxgate_sim.runner import Ledger, send_coap, send_mqtt
from fluxgate_sim.signals import METRICS, SHAPES

log = logging.getLogger("fluxgate_sim.fleet")

BUCKET_S = 0.01  # how finely the next seconds' reports are timed
TICK_S = 0.05  # how often the loop hands out what is due
CATCH_UP_S = 0.5  # the most schedule time one hand-out covers
YIELD_EVERY = 500  # reports between yields to the event loop, so the connections keep writing
_MASK = (1 << 64) - 1
# coap-ingest keeps one observation per resource in its list (FLUXGATE_COAP_RESOURCES): a
# fleet's CoAP share is bounded to what one gateway can observe, not a million.
MAX_COAP_DEVICES = 10_000


def fleet_device_name(index: int, devices: int, prefix: str = "") -> str:
    """``fleet-0000001`` for index 0: fixed width (7 digits, more past ten million devices)."""
    return f"{prefix}fleet-{index + 1:0{max(7, len(str(devices)))}d}"


def device_hash(seed: int, device: int, metric_index: int) -> int:
    """64 bits fixed by a device's id, metric and the seed (one splitmix64 round): its traits
    without storing them."""
    x = (((seed & 0xFFFFFFFF) << 32 | device) * 0x9E3779B97F4A7C15 + metric_index + 1) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def fleet_coap_names(devices: int, coap_devices: int, prefix: str = "") -> list[str]:
    """The fleet's CoAP devices: its last ``coap_devices`` ids."""
    return [fleet_device_name(index, devices, prefix) for index in range(devices - coap_devices, devices)]


class FleetSchedule:
    """Which devices report when: each exactly once per period, within ``±jitter * period``
    of its own place in the period. Times are seconds since the run began. The run starts in
    the middle of the fleet's life, at full rate: the period before it (cycle -1) is drawn
    too, and its reports jittered past 0 go out; those before 0 were sent before the run."""

    def __init__(self, devices: int, period_s: float, jitter: float = 0.1, seed: int | None = None) -> None:
        if devices < 1 or period_s <= 0:
            raise ValueError("a fleet needs at least one device and a positive period")
        if not 0.0 <= jitter < 0.5:
            raise ValueError(f"jitter is a fraction of the period below 0.5, got {jitter}")
        self.devices, self.period_s, self.spread_s = devices, period_s, jitter * period_s
        self._rng = random.Random(seed)
        self._a = self._coprime_multiplier(devices, self._rng)
        self._b = self._rng.randrange(devices)
        # Positions (cycle * N + place) already put in a bucket; from the last ones of cycle -1.
        self._placed = -math.ceil(self.spread_s * devices / period_s)
        self._buckets: dict[int, array[int]] = {}
        self._next_bucket = 0  # the first bucket not handed out yet

    @property
    def rate(self) -> float:
        """Reports per second: N / P."""
        return self.devices / self.period_s

    @property
    def handed_out_until(self) -> float:
        """Every report due before this time (seconds) has been handed out."""
        return self._next_bucket * BUCKET_S

    def device_at(self, position: int) -> int:
        return (self._a * (position % self.devices) + self._b) % self.devices

    def nominal_s(self, position: int) -> float:
        """When position ``cycle * N + place`` reports before jitter."""
        return position * self.period_s / self.devices

    def due(self, now_s: float) -> Iterator[int]:
        """The positions due by ``now_s`` not handed out yet, in time order (to 10 ms);
        ``position // devices`` is the report's cycle (from -1) and ``device_at(position)`` its device."""
        spread, step = self.spread_s, self.period_s / self.devices
        # A place goes into a bucket once its earliest time (nominal - spread) has come; the
        # draws happen in place order, so a seed fixes every report's time however often this runs.
        while self._placed * step - spread <= now_s + 2 * BUCKET_S:  # a margin: placed before its bucket is due
            at = self.nominal_s(self._placed) + (self._rng.uniform(-spread, spread) if spread else 0.0)
            if at >= 0:
                bucket = max(int(at / BUCKET_S), self._next_bucket)  # placed late (behind): due now
                self._buckets.setdefault(bucket, array("q")).append(self._placed)
            self._placed += 1
        last = int(now_s / BUCKET_S)
        for bucket in range(self._next_bucket, last + 1):
            self._next_bucket = bucket + 1
            yield from self._buckets.pop(bucket, ())

    @staticmethod
    def _coprime_multiplier(devices: int, rng: random.Random) -> int:
        if devices == 1:
            return 1
        while True:
            a = rng.randrange(1, devices)
            if math.gcd(a, devices) == 1:
                return a


@dataclass(frozen=True)
class FleetConfig:
    """A fleet run; the ``fluxgate-sim fleet`` options map one to one onto these fields."""

    devices: int
    period: float = 60.0
    jitter: float = 0.1
    duration: float | None = None
    metrics: tuple[str, ...] = ("temperature",)
    faults: Faults = field(default_factory=Faults)
    seed: int | None = None
    day_seconds: float = 86_400.0
    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = 1883
    mqtt_qos: int = 1
    mqtt_connections: int = 4
    mqtt_root: str = "sensors"
    mqtt_access: MqttAccess = field(default_factory=MqttAccess)
    device_prefix: str = ""
    ledger: Path | None = None
    report_every: float = 5.0
    coap_devices: int = 0
    coap_host: str = "127.0.0.1"
    coap_port: int = 5683
    coap_format: CoapFormat = "json"
    coap_psk: CoapPsk | None = None  # CoAP over DTLS with this pre-shared key
    shard: tuple[int, int] = (0, 1)  # (i, n): this process runs the ids i, i + n, i + 2n ...

    def __post_init__(self) -> None:
        index, count = self.shard
        if not 0 <= index < count <= self.devices:
            raise ValueError(f"shard must be i/n with 0 <= i < n <= devices, got {index}/{count}")
        if not 0 <= self.coap_devices <= min(self.devices, MAX_COAP_DEVICES):
            raise ValueError(f"coap_devices must be 0 to {MAX_COAP_DEVICES:,} and at most the devices")
        unknown = set(self.metrics) - set(METRICS)
        if unknown or not self.metrics:
            raise ValueError(f"metrics must be among {', '.join(METRICS)}; got {', '.join(self.metrics)}")
        FleetSchedule(self.devices, self.period, self.jitter)  # the same checks, before connecting


class FleetValues:
    """Each device's values: its own base and daily phase per metric (hashed from its id and
    the seed), the daily sine and noise; no random walk, which would need state per device."""

    def __init__(self, seed: int | None, day_seconds: float) -> None:
        self._seed = seed or 0
        self._day = day_seconds

    def value(self, device: int, metric_index: int, metric: str, elapsed_s: float, rng: random.Random) -> float:
        shape, traits = SHAPES[metric], device_hash(self._seed, device, metric_index)
        base = shape.base + shape.base_spread * ((traits >> 32) / 2.0**31 - 1)  # high half: -1..1
        phase = 2 * math.pi * (traits & 0xFFFFFFFF) / 2.0**32  # low half
        daily = shape.amplitude * math.sin(2 * math.pi * elapsed_s / self._day + phase)
        value = base + daily + rng.gauss(0.0, shape.noise)
        return round(min(shape.high, max(shape.low, value)), shape.decimals)


class Fleet:
    """Runs a fleet until ``duration`` seconds or the stop event; says the rate it tries at
    the start and, every ``report_every`` seconds, the rate it reaches and how far behind it is."""

    def __init__(self, config: FleetConfig) -> None:
        self.config = config
        self.shard, self.shards = config.shard
        seed = None if config.seed is None else config.seed + 1000 * self.shard  # each shard its own draws
        local = (config.devices - self.shard + self.shards - 1) // self.shards
        self.schedule = FleetSchedule(local, config.period, config.jitter, seed)
        self._rng = random.Random(None if seed is None else seed + 1)
        self._values = FleetValues(config.seed, config.day_seconds)
        self._held: dict[int, Reading] = {}  # (device * metrics + metric) -> the reading held back
        self.stats: Counter[str] = Counter()
        self.reports = 0
        self.max_behind_s = 0.0  # the longest stall
        self.fell_behind = 0  # intervals it was behind throughout: it could not keep up
        self.ledger = Ledger(config.ledger)
        self.first_coap = config.devices - config.coap_devices  # devices from here on speak CoAP
        self.coap_server = CoapDeviceServer(config.coap_host, config.coap_port, config.coap_format, config.coap_psk)
        for device in range(self.first_coap, config.devices):
            if device % self.shards == self.shard:
                self.coap_server.add_device(self.device_name(device), config.metrics)

    @property
    def held(self) -> int:
        """Readings held back to arrive out of order: the one state that grows with devices
        (by the out-of-order fraction)."""
        return len(self._held)

    def device_name(self, device: int) -> str:
        return fleet_device_name(device, self.config.devices, self.config.device_prefix)

    async def run(self, stop: asyncio.Event | None = None) -> Counter[str]:
        """Report until done; returns how many emissions of each kind were sent."""
        config, stop = self.config, stop or asyncio.Event()
        mqtt = MqttFleet(config.mqtt_host, config.mqtt_port, qos=config.mqtt_qos, connections=config.mqtt_connections,
                         root=config.mqtt_root, access=config.mqtt_access)  # fmt: skip
        await mqtt.start()
        if self.config.coap_devices:
            await self.coap_server.start()
        log.info(
            "fleet start devices=%d shard=%d/%d period_s=%g jitter=%g connections=%d target_rate=%.1f/s "
            "readings_per_s=%.1f", config.devices, self.shard, self.shards, config.period, config.jitter,
            config.mqtt_connections, self.schedule.rate, self.schedule.rate * len(config.metrics),
        )  # fmt: skip
        try:
            await self._loop(mqtt, stop)
            await self.release_held(mqtt)
        finally:
            await mqtt.stop()
            await self.coap_server.stop()
            self.ledger.close()
        return self.stats

    async def _loop(self, mqtt: MqttFleet, stop: asyncio.Event) -> None:
        started = time.monotonic()
        progress = Progress(self, started)
        while not stop.is_set():
            now_s = time.monotonic() - started
            if self.config.duration is not None and now_s >= self.config.duration:
                return
            behind_s = now_s - self.schedule.handed_out_until
            self.max_behind_s = max(self.max_behind_s, behind_s)
            # A fleet that is behind catches up a bounded slice at a time, so its lag shows,
            # its progress lines keep coming and --duration still ends it.
            until_s = min(now_s, self.schedule.handed_out_until + CATCH_UP_S)
            for sent, position in enumerate(self.schedule.due(until_s), 1):
                await self.report(mqtt, position, now_s)
                if sent % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            self.ledger.flush()
            progress.maybe_log(now_s, behind_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, TICK_S - (time.monotonic() - started - now_s))):
                    await stop.wait()

    async def release_held(self, mqtt: MqttFleet) -> None:
        """At the end: what is still held back goes out, after its device's newer readings."""
        for key, held in self._held.items():
            await self._send(mqtt, key // len(self.config.metrics), released(held))
        self._held.clear()

    async def report(self, mqtt: MqttFleet, position: int, elapsed_s: float) -> None:
        """One report of one device: a reading of each metric, stamped by its clock (now)."""
        schedule, metrics = self.schedule, self.config.metrics
        device = self.shard + schedule.device_at(position) * self.shards  # the fleet's id, not the shard's
        cycle = position // schedule.devices + 1  # from cycle -1
        name, now_ms = self.device_name(device), int(time.time() * 1000)
        emissions: list[Emission] = []
        for index, metric in enumerate(metrics):
            value = self._values.value(device, index, metric, elapsed_s, self._rng)
            reading = Reading(name, metric, value, now_ms, cycle * len(metrics) + index + 1)
            key = device * len(metrics) + index
            out, held = apply_faults(self.config.faults, self._rng, reading, self._held.pop(key, None))
            if held is not None:
                self._held[key] = held
            emissions += out
        await self._send(mqtt, device, emissions)
        self.reports += 1

    async def _send(self, mqtt: MqttFleet, device: int, emissions: list[Emission]) -> None:
        if device < self.first_coap:
            send_mqtt(mqtt, device, emissions, self.ledger, self.stats, self._rng)
        elif emissions:  # a CoAP resource notifies a turn of the loop at a time
            await send_coap(self.coap_server, emissions, self.ledger, self.stats, self._rng)


class Progress:
    """The every-few-seconds line: reports/s reached against the target, lag, CPU and RSS;
    an error when the fleet stays behind its schedule, rather than drifting silently."""

    BEHIND_S = 1.0  # behind by more than this through a whole interval: it cannot keep up

    def __init__(self, fleet: Fleet, started: float) -> None:
        self.fleet, self.started = fleet, started
        self.last_s, self.last_reports, self.last_cpu = 0.0, 0, time.process_time()
        self.lag_s: list[float] = []  # the interval's lags: least and most

    def maybe_log(self, now_s: float, behind_s: float) -> None:
        """``behind_s``: how old the oldest report handed out at ``now_s`` was. One stall (the
        process descheduled) makes one large lag that the next hand-out catches up on; a fleet
        that cannot keep up is behind at every hand-out of the interval."""
        self.lag_s = [min(self.lag_s[0], behind_s), max(self.lag_s[1], behind_s)] if self.lag_s else [behind_s] * 2
        if now_s - self.last_s < self.fleet.config.report_every:
            return
        fleet, span = self.fleet, now_s - self.last_s
        rate, cpu = (fleet.reports - self.last_reports) / span, time.process_time()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        line = "fleet t_s=%.0f reports=%d rate=%.1f/s target=%.1f/s lag_s=%.2f..%.2f cpu=%.0f%% max_rss_mb=%.0f held=%d"
        args = (now_s, fleet.reports, rate, fleet.schedule.rate, *self.lag_s,
                100 * (cpu - self.last_cpu) / span, rss_mb, fleet.held)  # fmt: skip
        log.info(line, *args)
        if self.lag_s[0] > self.BEHIND_S:
            fleet.fell_behind += 1
            log.error(
                "fleet cannot keep up: at least %.1f s behind its schedule for %.0f s; reaching %.1f of %.1f "
                "reports/s (fewer devices, a longer period or more cores)", self.lag_s[0], span, rate,
                fleet.schedule.rate,
            )  # fmt: skip
        self.last_s, self.last_reports, self.last_cpu, self.lag_s = now_s, fleet.reports, cpu, []
