"""From consumed records to :class:`SinkItem`s: one per KCQL statement that reads the record's topic."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from itertools import groupby, repeat
from operator import attrgetter
from typing import Any

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import FluxgateError
from fluxgate_sink.errors import FieldMissing, SinkError, TransformError, UndecodableKey
from fluxgate_sink.formats import KEY_FIELD, StringKeys, json_first, key_reader
from fluxgate_sink.header_values import ReadHeader, header_value
from fluxgate_sink.ids import MakeId, fluxgate_id
from fluxgate_sink.kcql import EVENT_TIME_FIELDS, EVENT_TIME_PROPERTY, Statement, statements_for
from fluxgate_sink.sink import SinkItem

ReadKey = Callable[[bytes | None], Any]
_WHOLE_KEY = (KEY_FIELD,)  # PK _key: the record key itself, not a field of it


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

    def __init__(
        self,
        statements: Sequence[Statement],
        needs_ids: Callable[[Statement], bool] | None = None,
        read_key: ReadKey | None = None,
        make_id: MakeId = fluxgate_id,
        string_keys: StringKeys = "text",
        tombstones: Callable[[Statement], bool] | None = None,
        read_header: ReadHeader = header_value,
    ) -> None:
        self.statements = list(statements)
        # Which statements take a tombstone (a null value) as an item whose value fields are all
        # null (a delete, in Stream-Reactor 10.x's Cassandra sink); asked only when one is met,
        # since the sink may know only after its setup. Anywhere else it does not decode.
        self._tombstones = tombstones
        read_key = read_key or key_reader("string", schemas_enable=False)
        # Decided once per statement, not per record: a statement without a PK whose store
        # never keys by the id (a ringbuffer, a queue) gets the Kafka coordinates, as a record
        # without the default key fields always did, instead of an id derived from each record.
        keyed = needs_ids or (lambda _: True)
        self._plans = {
            s.topic: [
                _Plan.of(t, bool(t.pk) or keyed(t), read_key, make_id, string_keys == "json", read_header)
                for t in statements_for(self.statements, s.topic)
            ]
            for s in self.statements
        }

    @property
    def topics(self) -> list[str]:
        return list(self._plans)

    @property
    def reads_keys(self) -> bool:
        """Whether some statement reads the record key (``PK _key``, ``SELECT _key.<field>``)."""
        return any(plan.read_key is not None for plans in self._plans.values() for plan in plans)

    def batch_size(self, topic: str, default: int) -> int:
        """The smallest ``BATCH=`` among the topic's statements, else ``default``."""
        sizes = [p.statement.batch_size for p in self._plans.get(topic, ()) if p.statement.batch_size]
        return min(sizes, default=default)

    def route(self, records: Sequence[ConsumedRecord]) -> Routed:
        """Items in record order (a record's items in statement order), whatever their topics."""
        routed = Routed()
        for topic, run in groupby(records, attrgetter("topic")):  # a runner's batch: one partition, one run
            plans = self._plans.get(topic, ())
            decoded = _decoded(run, routed.undecodable, partial(self._takes_tombstones, plans))
            if len(plans) == 1:
                plans[0].route_into(decoded, routed)
            elif plans:  # several statements read the topic: record by record, as one statement would
                for per_record in zip(*(plan.route(decoded) for plan in plans), strict=True):
                    _sort(per_record, routed)
        return routed

    def _takes_tombstones(self, plans: Sequence[_Plan]) -> bool:
        """Whether every statement of a topic takes its tombstones (one that does not would have
        to dead-letter the record the others write: the record is dead-lettered whole, as before)."""
        takes = self._tombstones
        return bool(plans) and takes is not None and all(takes(plan.statement) for plan in plans)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What routing through one statement needs, worked out once instead of for every record."""

    statement: Statement
    keyed: bool
    whole: bool  # SELECT * without IGNORE: the document is the decoded record itself
    dated: bool  # the target's name depends on the event time (WITHINDEXSUFFIX)
    time_fields: tuple[str, ...]  # top-level fields that may hold the event time, in order
    read_key: ReadKey | None  # only for a statement whose PK or SELECT names the record key (_key)
    make_id: MakeId  # Fluxgate's ids or Stream-Reactor's (fluxgate_sink.ids)
    parse_string_keys: bool  # a string key parsed as JSON first (formats.json_first: Stream-Reactor's)
    pk_key: bool = False  # the PK names the record key: the id is looked up in the value and _key
    metadata: bool = False  # the SELECT names the key's fields or headers: projected with them
    any_key: ReadKey | None = None  # the sink's key reader, for a tombstone's key (tombstone_document)
    read_header: ReadHeader = header_value  # the sink's header converter (formats.header_reader)

    @classmethod
    def of(
        cls,
        statement: Statement,
        keyed: bool,
        read_key: ReadKey,
        make_id: MakeId,
        parse_string_keys: bool = False,
        read_header: ReadHeader = header_value,
    ) -> _Plan:
        named = statement.properties.get(EVENT_TIME_PROPERTY)
        fields = EVENT_TIME_FIELDS if named is None else () if "." in named else (named,)
        by_key = any(path[0] == KEY_FIELD for path in statement.pk)
        dated = bool(statement.index_suffix)
        # Decided per statement: only one that names the key decodes it, only one that names a
        # header reads the headers; the others cost nothing more than before.
        reads_key = read_key if by_key or statement.reads_key else None
        metadata = statement.reads_key or statement.reads_headers
        whole = statement.selects_everything
        return cls(
            statement,
            keyed,
            whole,
            dated,
            fields,
            reads_key,
            make_id,
            parse_string_keys,
            by_key,
            metadata,
            read_key,
            read_header,
        )

    def route_into(self, records: list[ConsumedRecord], routed: Routed) -> None:
        """:meth:`route`'s results sorted into ``routed``: when every record routes (the usual
        case), at once, without a try and a type check per record."""
        try:
            items = self.whole_items(records) or [self.item(record) for record in records]
        except Exception:  # some record does not route: record by record, as route() reports it
            _sort(self.route(records), routed)
            return
        routed.items.extend(items)

    def whole_items(self, records: list[ConsumedRecord]) -> list[SinkItem] | None:
        """The items of ``SELECT *`` to a fixed target with no id, made without a Python call per
        record (0.6 µs a record less): each one's document is its value, and its event time the
        first time field's, when that holds a UTC datetime in every record (what decoding an
        aggregate gives). None when anything differs: then :meth:`item`, record by record."""
        if not (self.whole and not self.dated and not self.keyed and self.time_fields and records):
            return None
        values = list(map(_value, records))
        if None in values:  # a tombstone (_decoded): item() makes its document
            return None
        times = list(map(dict.get, values, repeat(self.time_fields[0])))
        if set(map(type, times)) != {datetime} or set(map(id, map(_zone, times))) != {id(UTC)}:
            return None
        statement = self.statement
        fields = zip(records, repeat(statement), repeat(statement.target), repeat(""), values, times)
        return list(map(tuple.__new__, repeat(SinkItem), fields))  # SinkItem(*f) without its Python __new__

    def route(self, records: list[ConsumedRecord]) -> list[SinkItem | Unroutable]:
        out: list[SinkItem | Unroutable] = []
        for record in records:
            try:
                out.append(self.item(record))
            except Exception as exc:  # a bad record must never stop the batch: report it
                out.append(Unroutable(record, self.statement, _as_sink_error(exc)))
        return out

    def item(self, record: ConsumedRecord) -> SinkItem:
        """The record's item; a record without a value is a tombstone :func:`_decoded` let through."""
        statement, value = self.statement, record.record or {}
        event_time = self.event_time(record, value)
        key = self.key(record) if self.read_key is not None else None
        target = statement.target_for(event_time) if self.dated else statement.target
        document_id = self.make_id(record, statement, self.with_key(key, value)) if self.keyed else ""
        if record.record is None:
            document = self.tombstone_document(record, key)
        elif self.whole:
            document = value
        elif self.metadata:  # the id first, as before: a PK error is reported before a SELECT's
            document = statement.project(value, key, record.headers, self.read_header)
        else:
            document = statement.project(value)
        return SinkItem(record, statement, target, document_id, document, event_time)

    def tombstone_document(self, record: ConsumedRecord, key: Any) -> dict[str, Any]:
        """A tombstone's document: what the SELECT names (its value fields null). A statement that
        does not read the key gets the decoded key as ``_key``, the one thing a tombstone has: a
        sink deletes by it (Stream-Reactor's Cassandra sink's connect.cassandra.delete.*)."""
        if self.read_key is not None:
            return self.statement.project(None, key, record.headers, self.read_header)
        document = self.statement.project(None, None, record.headers, self.read_header)
        document[KEY_FIELD] = self.key(record, self.any_key)
        return document

    def key(self, record: ConsumedRecord, reader: ReadKey | None = None) -> Any:
        """The record key as the statement reads it (or as ``reader`` does); UndecodableKey (the
        record is dead-lettered, as one whose value does not decode) when it does not decode in
        the sink's key format."""
        reader = reader or self.read_key
        if record.transformed_key is not None:  # the sink's transforms read or replaced it
            key = record.transformed_key[0]
        elif reader is None:  # the statement does not read the key
            return None
        else:
            try:
                key = reader(record.key)
            except FluxgateError as exc:
                raise UndecodableKey(f"the record key does not decode: {exc}") from exc
        if self.parse_string_keys:  # after the transforms, as the sink sees the key they leave
            key = json_first(key)
        return key

    def with_key(self, key: Any, value: dict[str, Any]) -> dict[str, Any]:
        """What the PK is looked up in: the value, and the decoded key as ``_key`` when the PK names it
        (Stream-Reactor's ``PK _key``: the record key is the document id)."""
        if not self.pk_key:
            return value
        if isinstance(key, Mapping) and _WHOLE_KEY in self.statement.pk:
            # Stream-Reactor reads a key to a JSON node and a PK path into it (elastic7's
            # TransformAndExtractPK.scala, `_key` with PrimaryKeyExtractor.extract(keyNode, path.tail)):
            # a struct key with nothing after `_key` is "not resolving to a primitive field", refused.
            # Refused here too, and, as a key that does not decode, always dead-lettered, never a stop.
            fields = ", ".join(map(str, key)) or "none"
            raise UndecodableKey(
                f"the record key is a record (fields {fields}), not one value: PK _key takes a string or "
                "number key; name one of the key's fields instead, PK _key.<field>"
            )
        return {**value, KEY_FIELD: key}

    def event_time(self, record: ConsumedRecord, value: dict[str, Any]) -> datetime:
        """A top-level UTC datetime (what a decoded aggregate holds) is taken as it is; anything
        else (epoch millis, another zone, a nested or missing field) goes the general way."""
        for name in self.time_fields:
            if name in value:
                found = value[name]
                if type(found) is datetime and found.tzinfo is UTC:
                    return found
                break
        return _event_time(record, self.statement)


_zone = attrgetter("tzinfo")
_value = attrgetter("record")  # None when the record did not decode


def _decoded(
    records: Iterable[ConsumedRecord], undecodable: list[ConsumedRecord], tombstones: Callable[[], bool]
) -> list[ConsumedRecord]:
    """The records to route, in order; the others go to ``undecodable``. A tombstone is routed
    when ``tombstones()`` says the topic's statements take them."""
    records = list(records)
    if None not in map(_value, records):  # the usual case: all decoded, checked in C
        return records
    keep = any(map(is_tombstone, records)) and tombstones()
    decoded: list[ConsumedRecord] = []
    for record in records:
        (decoded if record.record is not None or (keep and is_tombstone(record)) else undecodable).append(record)
    return decoded


def is_tombstone(record: ConsumedRecord) -> bool:
    """A record with a null (or empty) value that no transform failed on: the consumer hands a
    null value over as ``b""``, which no converter reads as anything but null."""
    return record.record is None and not record.value and not isinstance(record.error, TransformError)


def _sort(routed_items: Iterable[SinkItem | Unroutable], routed: Routed) -> None:
    for entry in routed_items:
        if isinstance(entry, Unroutable) and isinstance(entry.error, UndecodableKey):  # as a value that does not decode
            routed.undecodable.append(entry.source._replace(error=entry.error))
        elif isinstance(entry, Unroutable):
            routed.unroutable.append(entry)
        else:
            routed.items.append(entry)


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


def _as_sink_error(exc: Exception) -> SinkError:
    if isinstance(exc, SinkError):
        return exc
    retriable = exc.retriable if isinstance(exc, FluxgateError) else False
    error = SinkError(f"cannot route record: {type(exc).__name__}: {exc}", retriable=retriable)
    error.__cause__ = exc
    return error
