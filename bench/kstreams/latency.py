"""Window close → aggregate on the output topic, the same for the job and its Kafka Streams peer.

Readings are produced at a paced rate and stamped with the wall clock as they are sent (as
``bench/pipeline.py``'s devices stamp theirs), so a window closes, in wall time, at its end
plus the grace (the job's watermark delay): the instant the first reading past it is sent.
A thread reads the output topic and keeps when each (device, window start) first arrived;
the latency of a window is that instant minus its close.

Imported as ``kstreams.latency`` by the scripts in ``bench/``.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Self

from _readings import FastEncoder, Readings
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from kstreams.peer import percentile

from fluxgate_core.schemas import SENSOR_READING, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder

TICK = 0.005  # seconds between two bursts of the pacer


@dataclass(frozen=True)
class WallClockReadings(Readings):
    """``Readings``' devices and values, stamped with the time they are encoded."""

    def event_ms(self, i: int) -> int:
        return int(time.time() * 1000)


@dataclass
class Paced:
    """What the pacer sent: epoch seconds of its first and last reading, and how many."""

    start: float
    end: float
    sent: int

    @property
    def rate(self) -> float:
        return self.sent / (self.end - self.start) if self.end > self.start else 0.0


def pace(bootstrap: str, client: SchemaRegistryClient, topic: str, devices: int, rate: float, seconds: float) -> Paced:
    """Send ``rate`` readings a second to ``topic`` for ``seconds``, in bursts every few ms."""
    encoder = AvroEncoder.registered(client, topic, schema_text(SENSOR_READING), schema_dict(SENSOR_READING))
    readings = WallClockReadings(int(rate * seconds) + 1, devices, 60_000)
    fast = FastEncoder(encoder, readings)
    # Keyed by device and lz4 like the gateways, but lingering little: the close is the send.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4", "linger.ms": 5}
    )
    start = time.time()
    sent = 0
    while (now := time.time()) < start + seconds:
        due = min(int((now - start) * rate), readings.count)
        while sent < due:
            producer.produce(topic, fast.encode(sent), readings.device(sent).encode())
            sent += 1
        producer.poll(0)
        time.sleep(TICK)
    end = time.time()
    if producer.flush(60) != 0:
        raise SystemExit(f"could not produce every paced reading to {topic}")
    return Paced(start, end, sent)


@dataclass
class TopicWatch(ABC):
    """Reads ``topic`` from the start in a thread, handing each record's decoded value to
    :meth:`arrived` with the instant it was read (before decoding: what is measured is the
    arrival)."""

    bootstrap: str
    topic: str
    partitions: int
    client: SchemaRegistryClient
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=type(self).__name__.lower(), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    @abstractmethod
    def arrived(self, record: dict[str, Any], now: float) -> None:
        """What a watch does with each record, read at ``now``."""

    def _run(self) -> None:
        decoder = AvroDecoder(self.client)
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-{type(self).__name__.lower()}-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not self._stop.is_set():
                for message in consumer.consume(1000, 0.05):
                    now = time.time()
                    if not message.error():
                        self.arrived(decoder.decode(message.value() or b""), now)
        finally:
            consumer.close()


@dataclass
class Arrivals(TopicWatch):
    """When each window's aggregate first arrived on ``topic``."""

    seen: dict[tuple[str, int], float] = field(default_factory=dict)

    def arrived(self, record: dict[str, Any], now: float) -> None:
        self.seen.setdefault((record["device_id"], _ms(record["window_start"])), now)


def _ms(value: Any) -> int:
    return int(value.timestamp() * 1000) if hasattr(value, "timestamp") else int(value)


def latencies(
    arrivals: dict[tuple[str, int], float], paced: Paced, size_ms: int, grace_ms: int, settle_s: float, devices: int
) -> dict[str, Any]:
    """p50, p99 and max seconds from close to arrival, of the windows that closed while the
    readings flowed and ended ``settle_s`` or more after the first reading (the engine's first
    batches and JIT). A window counts by its end, not its close: a close comes a grace after
    the end, so a window ending before the first reading would close inside the span with
    nothing in it, and never arrive.

    Every device sends in every window, so ``devices`` windows close at each window end plus
    the grace; one that never arrived counts as infinitely late (a percentile it reaches is
    None, and ``missing`` says how many)."""
    closes = [
        close
        for close in range(_first_close_after(paced.start + settle_s + grace_ms / 1000, size_ms, grace_ms),
                           int(paced.end * 1000) + 1, size_ms)
    ]  # fmt: skip
    delays = sorted(
        seen - (begin + size_ms + grace_ms) / 1000
        for (_, begin), seen in arrivals.items()
        if (begin + size_ms + grace_ms) in closes
    )
    expected = len(closes) * devices
    missing = max(expected - len(delays), 0)
    ordered = delays + [math.inf] * missing
    if not ordered:
        return {"windows": 0, "expected": 0}

    def finite(value: float) -> float | None:
        return round(value, 3) if math.isfinite(value) else None

    return {
        "windows": len(delays),
        "expected": expected,
        "missing": missing,
        "p50_s": finite(percentile(ordered, 50)),
        "p99_s": finite(percentile(ordered, 99)),
        "max_s": finite(ordered[-1]),
        "by_close": by_close(arrivals, closes, paced.end, size_ms, grace_ms),
    }


def by_close(
    arrivals: dict[tuple[str, int], float], closes: list[int], end: float, size_ms: int, grace_ms: int
) -> list[dict[str, float | int | None]]:
    """Per counted close: how long before the pacer stopped it came, how many of its windows
    arrived, and their median delay. A delay that grows from close to close is an engine
    falling behind the rate; windows missing only at a close near the end are ones that
    waited for readings past it."""
    rows: list[dict[str, float | int | None]] = []
    for close in closes:
        delays = sorted(
            seen - close / 1000 for (_, begin), seen in arrivals.items() if begin + size_ms + grace_ms == close
        )
        median = round(percentile(delays, 50), 3) if delays else None
        rows.append({"before_end_s": round(end - close / 1000, 3), "arrived": len(delays), "p50_s": median})
    return rows


def _first_close_after(instant: float, size_ms: int, grace_ms: int) -> int:
    """Epoch ms of the first window close (a window end plus the grace) at or after ``instant``."""
    ends_after = math.ceil((instant * 1000 - grace_ms) / size_ms) * size_ms
    return ends_after + grace_ms
