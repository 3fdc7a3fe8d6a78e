"""``fates``: an independent check of what the pipeline made of the readings on `sensors.readings`.

It shares no code with the aggregator: the soak check's consumer and Avro decoding (the
registry by schema id, then fastavro; `tools/soak_check.py`) and its own windowing. Every
aggregate must equal its window recomputed from the readings on the topic (each identity
once), less the readings written to `temperatures.late`: a reading ends counted or late,
never both, never neither.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from soak_check import Decoder, Identity, end_offsets, identity, records, to_ms

# How long before a window's start its readings may have been written: the simulator's
# devices have right clocks, so none is written before its event time; a minute covers clock
# skew between the simulator and the broker several times over.
HISTORY_MARGIN_MS = 60_000


def wrong_aggregates(
    bootstrap: str,
    registry_url: str,
    window_ms: int,
    since: dict[int, int],
    metric: str = "temperature",
    windows_from_ms: int = 0,
) -> list[str]:
    """Every aggregate written after ``since`` (offsets of `temperatures.aggregated`), of a
    window starting at ``windows_from_ms`` or later, that differs from its window recomputed
    from the topics; empty when all agree. An aggregator on a fresh checkpoint aggregates the
    default topics' whole history again, earlier tests' readings too, whose late ones another
    aggregator decided: ``windows_from_ms`` keeps the check to the run's own windows."""
    decode = Decoder(registry_url)
    # Only records written from a while before the first window: a reading of a window is
    # written after its event time (late ones later still), so older records cannot be in it,
    # and a long-lived stack's history need not be read (it outlasted the test's timeout).
    written_from = windows_from_ms - HISTORY_MARGIN_MS if windows_from_ms else 0
    late_topic = records(bootstrap, "temperatures.late", offsets_at(bootstrap, "temperatures.late", written_from))
    late = {identity(r) for m in late_topic if (r := decode(m.value()))}
    windows: dict[tuple[str, int], dict[Identity, float]] = defaultdict(dict)
    for message in records(bootstrap, "sensors.readings", offsets_at(bootstrap, "sensors.readings", written_from)):
        reading = decode(message.value())
        if reading is None or reading["metric"] != metric or identity(reading) in late:
            continue
        start = to_ms(reading["event_time"]) // window_ms * window_ms
        windows[(reading["device_id"], start)][identity(reading)] = reading["value"]
    wrong = []
    for message in records(bootstrap, "temperatures.aggregated", since):
        aggregate = decode(message.value())
        assert aggregate is not None, f"undecodable aggregate at offset {message.offset()}"
        key = (aggregate["device_id"], to_ms(aggregate["window_start"]))
        if key[1] < windows_from_ms:
            continue
        values = list(windows.get(key, {}).values())
        if not _equal(aggregate, values):
            wrong.append(f"{key}: aggregate count {aggregate['count']} min {aggregate['min']} max {aggregate['max']}"
                         f"; the readings say {len(values)}: {sorted(values)}")  # fmt: skip
    return wrong


def offsets_at(bootstrap: str, topic: str, written_from_ms: int) -> dict[int, int]:
    """Each partition's first offset written at or after ``written_from_ms`` (its end when
    none was); the beginning for 0."""
    if not written_from_ms:
        return {}
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fluxgate-check"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, p, written_from_ms) for p in ends], timeout=10)
    finally:
        consumer.close()
    return {int(tp.partition): int(tp.offset) if tp.offset >= 0 else ends[tp.partition] for tp in found}


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

    def wrong_aggregates(self, window_ms: int, since: dict[int, int], windows_from_ms: int = 0) -> list[str]:
        return wrong_aggregates(self.bootstrap, self.registry_url, window_ms, since, windows_from_ms=windows_from_ms)

    def readings_by_protocol(self, written_from_ms: int) -> Counter[str]:
        """The readings on `sensors.readings` written from ``written_from_ms``, by the protocol
        they arrived over (MQTT, COAP): which gateway hops delivered."""
        decode = Decoder(self.registry_url)
        start = offsets_at(self.bootstrap, "sensors.readings", written_from_ms)
        decoded = (decode(m.value()) for m in records(self.bootstrap, "sensors.readings", start))
        return Counter(reading["source_protocol"] for reading in decoded if reading is not None)


@pytest.fixture
def fates(stack: Any) -> Fates:
    return Fates(stack.bootstrap, stack.registry_url)
