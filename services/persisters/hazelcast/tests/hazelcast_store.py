"""Items as the runner's router makes them, for this package's tests (no Kafka; never imported at run time)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from fluxgate_testing.aggregates import temperature_aggregate
from fluxgate_testing.sink.items import sink_item
from hazelcast.config import Config
from hazelcast.core import HazelcastJsonValue
from hazelcast.serialization.service import SerializationServiceV1

from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.sink import SinkItem

START = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def statement(target: str, store_as: str = "RING_BUFFER", extra: str = "") -> Statement:
    text = f"INSERT INTO {target} SELECT * FROM temperatures.aggregated STOREAS {store_as} {extra}"
    (parsed,) = parse(text)
    return parsed


def aggregate(device: int, minute: int, **changes: Any) -> dict[str, Any]:
    return temperature_aggregate(f"d{device}", START + timedelta(minutes=minute), **changes)


def item(stmt: Statement, record: dict[str, Any], offset: int, partition: int = 0, value: bytes = b"") -> SinkItem:
    return sink_item(stmt, record, offset, partition=partition, value=value)


def items(stmt: Statement, count: int, first_offset: int = 0) -> list[SinkItem]:
    return [item(stmt, aggregate(n % 10, n), first_offset + n) for n in range(count)]


def client_serialization() -> SerializationServiceV1:
    """The client's serialization with the options the sink leaves at their defaults."""
    return SerializationServiceV1(Config())


def read_json(value: object) -> Any:
    """A stored value as a reader of the structure sees it: the client turns it back into a
    ``HazelcastJsonValue``, whose string is parsed."""
    stored = client_serialization().to_object(value)
    assert isinstance(stored, HazelcastJsonValue)
    return json.loads(stored.to_string())
