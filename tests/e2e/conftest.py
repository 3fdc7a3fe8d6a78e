"""``fates``: an independent check of what the pipeline made of the readings on `sensors.readings`.

It shares no code with the aggregator: its own consumer, its own Avro decoding (the registry
by schema id, then fastavro) and its own windowing. Every aggregate must equal its window
recomputed from the readings on the topic (each identity once), less the readings written
to `temperatures.late`: a reading ends counted or late, never both, never neither.
"""

from __future__ import annotations

import io
import json
import math
import struct
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import Consumer, Message, TopicPartition

Identity = tuple[Any, ...]


@dataclass
class Decoder:
    """Confluent wire format (magic byte, schema id, Avro body) with the writer schema by id."""

    registry_url: str
    schemas: dict[int, Any] = field(default_factory=dict)

    def __call__(self, data: bytes | None) -> dict[str, Any] | None:
        if data is None or len(data) < 5 or data[0] != 0:
            return None
        schema_id = struct.unpack(">I", data[1:5])[0]
        if schema_id not in self.schemas:
            reply = httpx.get(f"{self.registry_url}/schemas/ids/{schema_id}", timeout=10)
            reply.raise_for_status()
            self.schemas[schema_id] = fastavro.parse_schema(json.loads(reply.json()["schema"]))
        try:
            record = fastavro.schemaless_reader(io.BytesIO(data[5:]), self.schemas[schema_id])
        except (EOFError, ValueError, TypeError, IndexError):
            return None
        return record if isinstance(record, dict) else None


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fluxgate-e2e-fates"})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in metadata.partitions}
    finally:
        consumer.close()


def records(bootstrap: str, topic: str, start: dict[int, int] | None = None) -> Iterator[Message]:
    """Every record of ``topic`` from ``start`` (default: the beginning) to its end now."""
    ends = end_offsets(bootstrap, topic)
    begin = start or {}
    left = {p: end for p, end in ends.items() if end > begin.get(p, 0)}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fluxgate-e2e-fates", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, begin.get(p, 0)) for p in left])
        while left:
            for message in consumer.consume(1000, timeout=5):
                partition, offset = message.partition(), message.offset()
                if message.error() is not None or partition is None or offset is None:
                    continue
                if offset + 1 >= ends[partition]:
                    left.pop(partition, None)
                yield message
    finally:
        consumer.close()


def _ms(value: datetime | int) -> int:
    return int(value.timestamp() * 1000) if isinstance(value, datetime) else value


def identity(reading: dict[str, Any]) -> Identity:
    event_ms = _ms(reading["event_time"])
    return (reading["device_id"], reading["metric"], event_ms, reading["value"], reading.get("sequence"))


def wrong_aggregates(
    bootstrap: str, registry_url: str, window_ms: int, since: dict[int, int], metric: str = "temperature"
) -> list[str]:
    """Every aggregate written after ``since`` (offsets of `temperatures.aggregated`) that
    differs from its window recomputed from the topics; empty when all agree."""
    decode = Decoder(registry_url)
    late = {identity(r) for m in records(bootstrap, "temperatures.late") if (r := decode(m.value()))}
    windows: dict[tuple[str, int], dict[Identity, float]] = defaultdict(dict)
    for message in records(bootstrap, "sensors.readings"):
        reading = decode(message.value())
        if reading is None or reading["metric"] != metric or identity(reading) in late:
            continue
        start = _ms(reading["event_time"]) // window_ms * window_ms
        windows[(reading["device_id"], start)][identity(reading)] = reading["value"]
    wrong = []
    for message in records(bootstrap, "temperatures.aggregated", since):
        aggregate = decode(message.value())
        assert aggregate is not None, f"undecodable aggregate at offset {message.offset()}"
        key = (aggregate["device_id"], _ms(aggregate["window_start"]))
        values = list(windows.get(key, {}).values())
        if not _equal(aggregate, values):
            wrong.append(f"{key}: aggregate count {aggregate['count']} min {aggregate['min']} max {aggregate['max']}"
                         f"; the readings say {len(values)}: {sorted(values)}")  # fmt: skip
    return wrong


def _equal(aggregate: dict[str, Any], values: list[float]) -> bool:
    if aggregate["count"] != len(values) or not values:
        return False
    mean = sum(values) / len(values)
    stddev = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    close = [math.isclose(aggregate[k], v, rel_tol=1e-9, abs_tol=1e-9) for k, v in (("mean", mean), ("stddev", stddev))]
    return aggregate["min"] == min(values) and aggregate["max"] == max(values) and all(close)


@dataclass(frozen=True)
class Fates:
    bootstrap: str
    registry_url: str

    def aggregated_until_now(self) -> dict[int, int]:
        return end_offsets(self.bootstrap, "temperatures.aggregated")

    def wrong_aggregates(self, window_ms: int, since: dict[int, int]) -> list[str]:
        return wrong_aggregates(self.bootstrap, self.registry_url, window_ms, since)


@pytest.fixture
def fates(stack: Any) -> Fates:
    return Fates(stack.bootstrap, stack.registry_url)
