"""From consumed records to :class:`SinkItem`s: one per KCQL statement that reads the record's topic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fluxgate_core.errors import FluxgateError
from fluxgate_core.kafka import ConsumedRecord
from fluxgate_sink.errors import FieldMissing, SinkError
from fluxgate_sink.kcql import EVENT_TIME_PROPERTY, Statement, statements_for
from fluxgate_sink.sink import SinkItem


@dataclass(frozen=True, slots=True)
class Unroutable:
    """A decoded record a statement could not turn into an item (a PK field missing ...)."""

    source: ConsumedRecord
    statement: Statement
    error: SinkError


@dataclass(slots=True)
class Routed:
    items: list[SinkItem] = field(default_factory=list)
    unroutable: list[Unroutable] = field(default_factory=list)
    undecodable: list[ConsumedRecord] = field(default_factory=list)


class Router:
    """Routes records through the statements; what cannot be routed is reported, never raised."""

    def __init__(self, statements: Sequence[Statement], needs_ids: Callable[[Statement], bool] | None = None) -> None:
        self.statements = list(statements)
        self._by_topic = {s.topic: statements_for(self.statements, s.topic) for s in self.statements}
        # Decided once per statement, not per record: a statement without a PK whose store
        # never keys by the id (a ringbuffer, a queue) gets the Kafka coordinates, as a record
        # without the default key fields always did, instead of an id derived from each record.
        keyed = needs_ids or (lambda _: True)
        self._keyed = {s.topic: [bool(t.pk) or keyed(t) for t in self._by_topic[s.topic]] for s in self.statements}

    @property
    def topics(self) -> list[str]:
        return list(self._by_topic)

    def batch_size(self, topic: str, default: int) -> int:
        """The smallest ``BATCH=`` among the topic's statements, else ``default``."""
        sizes = [s.batch_size for s in self._by_topic.get(topic, ()) if s.batch_size]
        return min(sizes, default=default)

    def route(self, records: Sequence[ConsumedRecord]) -> Routed:
        routed = Routed()
        for record in records:
            if record.record is None:
                routed.undecodable.append(record)
                continue
            statements = self._by_topic.get(record.topic, ())
            for statement, keyed in zip(statements, self._keyed.get(record.topic, ()), strict=True):
                try:
                    routed.items.append(_item(record, statement, keyed))
                except Exception as exc:  # a bad record must never stop the batch: report it
                    routed.unroutable.append(Unroutable(record, statement, _as_sink_error(exc)))
        return routed


def _item(record: ConsumedRecord, statement: Statement, keyed: bool = True) -> SinkItem:
    value = record.record or {}
    event_time = _event_time(record, statement)
    return SinkItem(
        source=record,
        statement=statement,
        target=statement.target_for(event_time),
        id=_document_id(record, statement) if keyed else record.source,
        document=statement.project(value),
        event_time=event_time,
    )


def _event_time(record: ConsumedRecord, statement: Statement) -> datetime:
    """The record's event time. Only where nothing depends on it (no daily suffix, no field named
    for it) may a record without one fall back to its Kafka timestamp: an index is never dated
    by anything but event time."""
    try:
        return statement.event_time(record.record or {})
    except FieldMissing:
        if statement.index_suffix or EVENT_TIME_PROPERTY in statement.properties:
            raise
        return datetime.fromtimestamp(record.timestamp_ms / 1000, UTC)


def _document_id(record: ConsumedRecord, statement: Statement) -> str:
    """The PK's values; without a PK and without the default key fields (a ringbuffer of plain
    readings), the record's Kafka coordinates, which are as stable across a replay."""
    try:
        return statement.document_id(record.record or {})
    except FieldMissing:
        if statement.pk:
            raise
        return record.source


def _as_sink_error(exc: Exception) -> SinkError:
    if isinstance(exc, SinkError):
        return exc
    retriable = exc.retriable if isinstance(exc, FluxgateError) else False
    error = SinkError(f"cannot route record: {type(exc).__name__}: {exc}", retriable=retriable)
    error.__cause__ = exc
    return error
