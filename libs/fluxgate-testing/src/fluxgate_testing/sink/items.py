"""SinkItems as the runtime's router makes them, for tests that hand a sink items directly."""

from __future__ import annotations

from typing import Any

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_sink.kcql import Statement
from fluxgate_sink.sink import SinkItem

TOPIC = "temperatures.aggregated"


def sink_item(
    statement: Statement,
    record: dict[str, Any],
    offset: int = 0,
    *,
    partition: int = 0,
    key: bytes = b"k",
    value: bytes = b"",
) -> SinkItem:
    """The item of decoded ``record``, read from ``TOPIC`` at ``partition``/``offset``, under
    ``statement``: its target, document id, projection and event time as the router gives them."""
    source = ConsumedRecord(TOPIC, partition, offset, key, value, (), 0, record)
    event_time = statement.event_time(record)
    target = statement.target_for(event_time)
    return SinkItem(source, statement, target, statement.document_id(record), statement.project(record), event_time)
