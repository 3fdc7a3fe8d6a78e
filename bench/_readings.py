"""The aggregator benchmark's input: one formula for the i-th reading, and a fast way into Kafka.

Both the Kafka legs (produced here) and the ``rate`` leg (the same formulas in Spark SQL)
see identical devices, values and event times, so their windows and state are alike.
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - the PySpark idiom

from fluxgate_core.schemas import SENSOR_READING, schema_dict, schema_text
from fluxgate_core.serde import AvroEncoder

# The reference aggregation lives with the aggregator's tests (not in its package or image).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "services" / "aggregator" / "tests"))
from aggregator_reference import reading

METRIC, UNIT = "temperature", "Cel"
FIRST_EVENT_MS = 1_700_000_000_000  # fixed and minute-aligned, so every run windows alike
# Keyed by device and lz4-compressed like the gateways' producers, so the stage reading the
# topic (Spark, a persister) decompresses and spreads the same way it does in production.
PRODUCER_CONFIG = {
    "enable.idempotence": True,
    "compression.type": "lz4",
    "linger.ms": 50,
    "queue.buffering.max.messages": 500_000,
}

Record = TypeVar("Record")


@dataclass(frozen=True)
class Readings:
    """The i-th reading of every leg."""

    count: int
    devices: int
    span_ms: int

    def device(self, i: int) -> str:
        return f"d{i % self.devices}"

    def value(self, i: int) -> float:
        return 15 + (i % 200) / 10

    def event_ms(self, i: int) -> int:
        return FIRST_EVENT_MS + i * self.span_ms // self.count


def as_readings(rate: DataFrame, readings: Readings) -> DataFrame:
    """``rate-micro-batch`` rows as the ``reading`` struct ``read_decoded`` yields, by the same formulas."""
    i = F.col("value")
    event_ms = F.lit(FIRST_EVENT_MS) + F.expr(f"(value * {readings.span_ms}) div {readings.count}")
    record = F.struct(
        F.concat(F.lit("d"), (i % readings.devices).cast("string")).alias("device_id"),
        F.lit(METRIC).alias("metric"),
        (F.lit(15.0) + (i % 200) / 10).alias("value"),
        F.lit(UNIT).alias("unit"),
        F.timestamp_millis(event_ms).alias("event_time"),
    )
    return rate.select(record.alias("reading"))


class FastEncoder:
    """Wire-format SensorReadings of ``testing.reading()`` shape, from precomputed byte pieces.

    The project's fastavro encoder takes ~20 µs a record, most of a minute for a million;
    only the value and the two times differ between records, so the rest is encoded once
    per device. ``check()`` compares it with the real encoder before anything is produced.
    """

    def __init__(self, encoder: AvroEncoder, readings: Readings) -> None:
        self.encoder = encoder
        self.readings = readings
        header = struct.pack(">bI", 0, encoder.schema_id)
        devices = [readings.device(d) for d in range(readings.devices)]
        self._heads = [header + _string(device) + _string(METRIC) for device in devices]
        self._unit = b"\x02" + _string(UNIT)  # union branch 1: string
        # source_protocol MQTT (enum 0), source, sequence null (branch 0), no attributes (empty map)
        self._tails = [b"\x00" + _string(f"devices/{device}/{METRIC}") + b"\x00\x00" for device in devices]

    def encode(self, i: int) -> bytes:
        event_ms = self.readings.event_ms(i)
        device = i % self.readings.devices
        value = struct.pack("<d", self.readings.value(i))
        return self._heads[device] + value + self._unit + _long(event_ms) + _long(event_ms + 50) + self._tails[device]

    def keyed(self, i: int) -> tuple[bytes, bytes]:
        """Reading ``i`` as the gateways produce it: keyed by its device."""
        return self.readings.device(i).encode(), self.encode(i)

    def check(self, samples: int = 1000) -> None:
        for i in range(samples):
            record = reading(self.readings.device(i), self.readings.event_ms(i), self.readings.value(i))
            if self.encode(i) != self.encoder.encode(record):
                raise SystemExit(f"FastEncoder differs from AvroEncoder at reading {i}: did the schema change?")


def _long(number: int) -> bytes:
    """Avro long: zig-zag, then a base-128 varint."""
    zigzag = (number << 1) ^ (number >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode()
    return _long(len(data)) + data


def produce_input(bootstrap: str, client: SchemaRegistryClient, topic: str, readings: Readings) -> dict[str, Any]:
    """Every reading into ``topic``, registered and encoded as the gateways do; what was produced."""
    encoder = AvroEncoder.registered(client, topic, schema_text(SENSOR_READING), schema_dict(SENSOR_READING))
    fast = FastEncoder(encoder, readings)
    fast.check()
    seconds = produce(bootstrap, topic, range(readings.count), fast.keyed, "reading", {"batch.size": 1_000_000})
    print(f"produced {readings.count} readings to {topic} in {seconds:.1f}s", flush=True)
    return {"topic": topic, "readings": readings.count, "seconds": round(seconds, 1)}


def produce_in_child(bootstrap: str, registry_url: str, topic: str, readings: Readings) -> dict[str, Any]:
    """:func:`produce_input` in a process of its own: the producer's queue and the allocator's
    arenas it leaves behind (a few hundred MiB for a million readings) would otherwise stay in
    the asking process's RSS, and a bench whose job runs in that process would charge them to
    the job's peak memory."""
    with ProcessPoolExecutor(1, get_context("spawn")) as pool:
        return pool.submit(_produce_from, bootstrap, registry_url, topic, readings).result()


def _produce_from(bootstrap: str, registry_url: str, topic: str, readings: Readings) -> dict[str, Any]:
    return produce_input(bootstrap, SchemaRegistryClient({"url": registry_url}), topic, readings)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    keyed: Callable[[Record], tuple[bytes, bytes]],
    what: str,
    config: Mapping[str, Any] | None = None,
) -> float:
    """Every record into ``topic`` as ``keyed`` gives its key and value, all sent; the seconds it took."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG, **(config or {})})
    started = time.perf_counter()
    for record in records:
        key, value = keyed(record)
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:  # librdkafka's queue is full: let it send
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise SystemExit(f"could not produce every {what} to {topic}")
    return time.perf_counter() - started


def count_records(bootstrap: str, topic: str, partitions: int) -> int:
    """Records in ``topic`` right now, from its partitions' offsets (nothing is read)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count", "enable.auto.commit": False})
    try:
        marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
    finally:
        consumer.close()
    return sum(high - low for low, high in marks)
