"""KCQL, the routing statements Stream-Reactor users already write, parsed into :class:`Statement`::

    INSERT INTO temperatures SELECT * FROM temperatures.aggregated WITHINDEXSUFFIX -{YYYY.MM.DD};
    UPSERT INTO indexA SELECT sensor.*, device.* FROM topicA PK device.id

The grammar and its error reporting are fluxgate-core's (:mod:`fluxgate_core.kcql`, one grammar
for the sinks and the gateways' sources); this module reads a sink's clauses from that parse. A
statement that does not parse or makes no sense raises :class:`~fluxgate_sink.errors.KcqlError`
naming the line and column, with the line and a caret.

Date patterns in WITHINDEXSUFFIX are calendar dates from the record's event time: see
:mod:`fluxgate_sink.dates`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from hashlib import sha256
from types import MappingProxyType
from typing import Any, Literal

from lark import Token, Tree

from fluxgate_core.consumed_record import RecordHeaders
from fluxgate_core.kcql import (
    EVERYTHING,
    SINK,
    FieldPath,
    FieldRef,
    ParsedStatement,
    field_path,
    leaf,
    located,
    parse_statements,
    unquote,
)
from fluxgate_sink.dates import PatternError, strftime_format, suffix, utc
from fluxgate_sink.errors import FieldMissing, KcqlError
from fluxgate_sink.header_values import ReadHeader, Unconvertible, Unrepresentable, header_value

__all__ = [
    "DEFAULT_PK",
    "EVENT_TIME_FIELDS",
    "EVENT_TIME_PROPERTY",
    "HASHED_ID_PREFIX",
    "HEADER_PREFIX",
    "KEY_PREFIX",
    "MAX_ID_BYTES",
    "VALUE_PREFIX",
    "FieldPath",
    "FieldRef",
    "Statement",
    "header_text",
    "lookup",
    "parse",
    "safe_id",
    "statements_for",
]

Format = Literal["JSON", "AVRO"]

EVENT_TIME_PROPERTY = "event.time.field"
EVENT_TIME_FIELDS = ("window_start", "event_time")
DEFAULT_PK: tuple[FieldPath, ...] = (("device_id",), ("metric",))  # then the event-time field

#: The longest id in UTF-8 bytes: Elasticsearch's ``_id`` limit, the tightest of the stores
#: (a Cassandra key component takes 65535, a Hazelcast key has none of its own). One limit
#: for all, so a record has the same id in every store.
MAX_ID_BYTES = 512
#: What a hashed id starts with (see safe_id).
HASHED_ID_PREFIX = "sha256:"
# An id of at most this many characters fits MAX_ID_BYTES whatever they are (4 bytes at most
# each in UTF-8): only a longer one is encoded to be measured.
_ALWAYS_FITS = MAX_ID_BYTES // 4
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_FORMATS: dict[str, Format] = {"JSON": "JSON", "AVRO": "AVRO"}

#: What a SELECT entry's first name says it reads, as Stream-Reactor's KCQL parser files it
#: (io/lenses/kcql/Kcql.java, exitColumn_name: an entry starting ``_key.`` is a key field, one
#: starting ``_header.`` a header field, any other a value field) and its 10.x Cassandra sink maps
#: them (CassandraSettings.scala, getTopicMappings: ``_value.x`` is the value's x, ``_key.x`` the
#: key's, ``_header.h`` header h). A bare ``_key``, ``_header`` or ``_value`` is a value field there.
KEY_PREFIX, HEADER_PREFIX, VALUE_PREFIX = "_key", "_header", "_value"
_VALUE, _KEY, _HEADER = 0, 1, 2  # where a SELECT entry reads (Statement._sources)


@dataclass(frozen=True)
class Statement:
    """One KCQL statement: which topic goes to which target, with which fields, keyed how."""

    text: str
    mode: Literal["INSERT", "UPSERT"]
    target: str
    topic: str
    fields: tuple[FieldRef, ...]
    ignore: tuple[FieldPath, ...] = ()
    pk: tuple[FieldPath, ...] = ()
    autocreate: bool = False
    batch_size: int | None = None
    index_suffix: str | None = None
    store_as: str | None = None
    format: Format | None = None
    ttl: int | None = None
    properties: Mapping[str, str] = dataclass_field(default_factory=lambda: MappingProxyType({}), hash=False)

    def __post_init__(self) -> None:
        # A caller's dict is copied and frozen, so the statement cannot change under the runner.
        object.__setattr__(self, "properties", MappingProxyType(dict(self.properties)))

    @property
    def selects_everything(self) -> bool:
        """``SELECT *`` with nothing ignored: the document is the whole record."""
        return not self.ignore and self.fields == EVERYTHING

    @cached_property
    def reads_key(self) -> bool:
        """Whether the SELECT names the record key's fields (``_key.<field>``, ``_key.*``)."""
        return any(where == _KEY for _, where, _ in self._sources)

    @cached_property
    def reads_headers(self) -> bool:
        """Whether the SELECT names a header (``_header.<name>``)."""
        return any(where == _HEADER for _, where, _ in self._sources)

    @cached_property
    def _sources(self) -> tuple[tuple[FieldRef, int, FieldPath], ...]:
        """Each SELECT entry, where it reads, and its path there (a header's: its name)."""
        return tuple((ref, *_source(ref.path, ref.wildcard)) for ref in self.fields)

    def project(
        self,
        record: Mapping[str, Any] | None,
        key: Any = None,
        headers: RecordHeaders = (),
        read_header: ReadHeader = header_value,
    ) -> dict[str, Any]:
        """The document to write: SELECT, AS and IGNORE applied; ``a.*`` lifts a's fields to the top.

        ``key`` (the decoded record key) and ``headers`` are read only by the entries that name
        them (``_key.<field>``, ``_header.<name>``): the router passes them only to a statement
        whose :attr:`reads_key` or :attr:`reads_headers` says so. A header's bytes become its value
        by ``read_header``, the sink's header converter (formats.header_reader; SimpleHeaderConverter's
        by default). A ``record`` of None is a
        tombstone's: each value field the SELECT names is null, and ``*`` selects none, as
        DataStax's connector reads a record without a value (KeyValueRecord: the key's fields
        and the headers only)."""
        tombstone = record is None
        if record is None:
            record = {}
        elif self.selects_everything:  # a copy; the router hands the record itself on (routing._Plan)
            return dict(record)
        ignored = frozenset(self.ignore)
        document: dict[str, Any] = {}
        for ref, where, path in self._sources:
            if not ref.wildcard:
                if ref.path not in ignored:
                    if where == _VALUE:
                        found = None if tombstone else lookup(record, path)
                    elif where == _KEY:
                        found = _key_field(key, path, ref.path)
                    else:
                        found = _header(headers, path[0], read_header)
                    document[ref.alias or ref.path[-1]] = _prune(found, ref.path, ignored)
                continue
            if where == _KEY:
                source = _key_field(key, path, ref.path) if path else _key_record(key, (*ref.path, "*"))
            elif tombstone:
                continue
            else:
                source = lookup(record, path) if path else record
            if not isinstance(source, Mapping):
                raise FieldMissing(
                    f"field {_dotted(ref.path)} is not a record, so {_dotted(ref.path)}.* selects nothing"
                )
            for name, value in source.items():
                if (at := (*ref.path, name)) not in ignored:
                    document[name] = _prune(value, at, ignored)
        return document

    def event_time_field(self, record: Mapping[str, Any]) -> str:
        """PROPERTIES('event.time.field'=...) if given, else the first of window_start, event_time present."""
        if name := self.properties.get(EVENT_TIME_PROPERTY):
            return name
        for name in EVENT_TIME_FIELDS:
            if name in record:
                return name
        raise FieldMissing(
            f"the record has no event time: none of {', '.join(EVENT_TIME_FIELDS)} (or set '{EVENT_TIME_PROPERTY}')"
        )

    def event_time(self, record: Mapping[str, Any]) -> datetime:
        """The record's event time in UTC, from a datetime or epoch milliseconds."""
        name = self.event_time_field(record)
        value = lookup(record, tuple(name.split(".")))
        if isinstance(value, datetime):
            return value if value.tzinfo is UTC else utc(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return _EPOCH + value * _MILLISECOND
        raise FieldMissing(f"field {name} is {value!r}, not a datetime or epoch milliseconds")

    def document_id(self, record: Mapping[str, Any]) -> str:
        """The PK fields of the original record joined with ``|`` (datetimes as epoch millis),
        made safe for every store by :func:`safe_id`: the same record always gets the same id,
        so a replay overwrites instead of duplicating."""
        paths = self.pk or (*DEFAULT_PK, tuple(self.event_time_field(record).split(".")))
        joined = "|".join(_id_part(lookup(record, path), path) for path in paths)
        return safe_id(joined) if len(joined) > _ALWAYS_FITS else joined  # one length check per record

    def target_for(self, event_time: datetime) -> str:
        """The target, with the index suffix formatted for ``event_time`` (``temperatures-2026.11.23``)."""
        if not self.index_suffix:
            return self.target
        when = utc(event_time)  # records of one day share one formatted name
        return self.target + suffix(self.index_suffix, when.year, when.month, when.day, when.hour, when.minute)


def parse(text: str) -> list[Statement]:
    """The statements in ``text``, separated by ``;``; raises KcqlError on any fault."""
    return [_statement(text, parsed) for parsed in parse_statements(text, SINK)]


def statements_for(statements: Iterable[Statement], topic: str) -> list[Statement]:
    """The statements that read ``topic``, in their order."""
    return [statement for statement in statements if statement.topic == topic]


def safe_id(joined: str) -> str:
    """``joined`` itself when its UTF-8 fits :data:`MAX_ID_BYTES` (every id written so far keeps
    its id), else ``sha256:`` and the hex SHA-256 of its UTF-8: as deterministic, so a replay
    upserts the same entry.

    A shorter id that happens to read ``sha256:<64 hex>`` is kept as it is (checking every id
    for the prefix cost more per record than the length check): it could only equal another
    record's hash if someone wrote that record's hash as key fields on purpose, and whoever
    can produce records can write that record's own key fields just as well."""
    encoded = joined.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_ID_BYTES:
        return joined
    return HASHED_ID_PREFIX + sha256(encoded).hexdigest()


def _id_part(value: Any, path: FieldPath) -> str:
    if value is None:
        raise FieldMissing(f"key field {_dotted(path)} is null")
    if isinstance(value, datetime):  # aware datetimes subtract across zones: no conversion needed
        return str(((value if value.tzinfo else value.replace(tzinfo=UTC)) - _EPOCH) // _MILLISECOND)
    return str(value)


def _dotted(path: FieldPath) -> str:
    return ".".join(path) or "*"


def lookup(record: Mapping[str, Any], path: FieldPath) -> Any:
    """The value at ``path`` (``("device", "id")`` is ``device.id``); FieldMissing if there is none."""
    if len(path) == 1 and type(record) is dict:  # a top-level field of a decoded record: the hot path
        try:
            return record[path[0]]
        except KeyError:
            raise FieldMissing(f"field {path[0]} is missing") from None
    value: Any = record
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            raise FieldMissing(f"field {_dotted(path)} is missing")
        value = value[name]
    return value


def _source(path: FieldPath, wildcard: bool) -> tuple[int, FieldPath]:
    """Where a SELECT entry reads (value, key or headers) and its path there. ``_key.*`` (path
    ``_key``, a wildcard) lifts the key's fields; a bare ``_key`` is a value field, as in Kcql.java."""
    if len(path) <= (0 if wildcard else 1) or path[0] not in (KEY_PREFIX, HEADER_PREFIX, VALUE_PREFIX):
        return _VALUE, path
    if path[0] == KEY_PREFIX:
        return _KEY, path[1:]
    if path[0] == HEADER_PREFIX:
        return _HEADER, (".".join(path[1:]),)  # a name may hold dots: _header.a.b is header "a.b"
    return _VALUE, path[1:]


def _key_record(key: Any, selected: FieldPath) -> Mapping[str, Any]:
    if key is None:
        raise FieldMissing(f"the record key is null, so {_dotted(selected)} selects nothing")
    if not isinstance(key, Mapping):
        raise FieldMissing(
            f"the record key is one value ({type(key).__name__}), not a record, so {_dotted(selected)} selects "
            "nothing (a record key with fields is JSON or Avro: set the sink's key format)"
        )
    return key


def _key_field(key: Any, path: FieldPath, selected: FieldPath) -> Any:
    """Field ``path`` of the decoded record key; FieldMissing (``selected`` named) if it has none."""
    try:
        return lookup(_key_record(key, selected), path)
    except FieldMissing:
        if not isinstance(key, Mapping):
            raise
        raise FieldMissing(f"field {_dotted(selected)} is missing: the record key has no {_dotted(path)}") from None


def _header(headers: RecordHeaders, name: str, read_header: ReadHeader) -> Any:
    """Header ``name``'s value (the last of that name, as ConsumedRecord.header and Kafka Connect's
    Headers.lastWithName) as the sink's header converter hands it to a sink. Kafka Connect's default,
    SimpleHeaderConverter (apache/kafka 4.4, connect/api/.../storage/SimpleHeaderConverter.java,
    toConnectHeader), reads the bytes as UTF-8 text and infers a typed value from it with
    Values.parseString: ``42`` is an int, ``true`` a bool, ``2026-11-23`` a date, ``[1,2]`` a list,
    ``mqtt-0`` stays text (:mod:`fluxgate_sink.header_values`). None when the header is null;
    FieldMissing when the record has none, when the converter refuses its bytes (Kafka Connect's
    DataException, which its errors.tolerance takes as the record's failure), or when Kafka
    Connect's value has no Python one."""
    try:
        return read_header(_header_bytes(headers, name))
    except (Unrepresentable, Unconvertible) as exc:
        raise FieldMissing(f"header {name}: {exc}") from None


def header_text(headers: RecordHeaders, name: str) -> str | None:
    """Header ``name``'s bytes as UTF-8 text (a malformed sequence as U+FFFD, as Java's
    ``new String(bytes, UTF_8)``), the text SimpleHeaderConverter typed its value
    (:meth:`Statement.project`) from: for a store's text column. None when null; FieldMissing when
    the record has none."""
    raw = _header_bytes(headers, name)
    return None if raw is None else raw.decode("utf-8", "replace")


def _header_bytes(headers: RecordHeaders, name: str) -> bytes | None:
    for header, value in reversed(headers):
        if header == name:
            return value
    raise FieldMissing(f"header {name} is missing")


def _prune(value: Any, path: FieldPath, ignored: frozenset[FieldPath]) -> Any:
    """``value`` without the IGNOREd fields nested under ``path`` (a copy; the record is not touched)."""
    if not isinstance(value, Mapping) or not any(p[: len(path)] == path and len(p) > len(path) for p in ignored):
        return value
    return {k: _prune(v, (*path, k), ignored) for k, v in value.items() if (*path, k) not in ignored}


# ---- from the core's parse to a Statement, with the sink's own checks that need positions ----


def _statement(text: str, parsed: ParsedStatement) -> Statement:
    for ref in parsed.fields:
        if ref.wildcard and ref.path[:1] == (HEADER_PREFIX,):
            # Kcql.java files `_header.*` as a header named "*"; no sink reads every header as fields.
            raise KcqlError(f"{parsed.text}: SELECT {_dotted(ref.path)}.*: name each header, _header.<name>")
    values: dict[str, Any] = {}
    for keyword, clause in parsed.clauses.items():
        values.update(_clause(text, clause, keyword, parsed.fields))
    return Statement(
        text=parsed.text,
        mode=parsed.mode,
        target=parsed.target,
        topic=parsed.sources[0],
        fields=parsed.fields,
        **values,
    )


def _clause(text: str, node: Tree[Token], keyword: str, fields: tuple[FieldRef, ...]) -> dict[str, Any]:
    kids = node.children
    if keyword in ("IGNORE", "PK"):
        paths = tuple(field_path(kid) for kid in kids)
        for kid, path in zip(kids, paths, strict=True):
            if not _selected(path, fields) and isinstance(kid, Tree):
                selected = ", ".join(_dotted(f.path) + (".*" if f.wildcard and f.path else "") for f in fields)
                why = f"{keyword} {_dotted(path)} names a field the statement does not select (SELECT {selected})"
                raise located(text, kid.meta, why)
        return {keyword.lower(): paths}
    if keyword == "AUTOCREATE":
        return {"autocreate": True}
    token = leaf(kids[0])
    if keyword == "TTL" and token.isdecimal() and int(token) == 0:
        # No TTL, exactly as if the clause were absent: Stream-Reactor's sinks write a TTL of 0 (its
        # default, when absent) without one: `if (ttl > 0L) ... USING TTL` in CassandraJsonWriter.scala
        # (kafka-connect-cassandra sink/), `if (ttl > 0) put(..., ttl, MILLISECONDS) else put(...)` in
        # MapWriter.scala (kafka-connect-hazelcast writers/). Its KCQL parser (Kcql.java, exitTtl_type)
        # refuses an explicit TTL=0; we take it as its writers read it.
        return {}
    if keyword in ("BATCH", "TTL"):
        if not token.isdecimal() or int(token) <= 0:
            raise located(text, token, f"{keyword} must be a positive integer, not '{token}'")
        return {"batch_size" if keyword == "BATCH" else "ttl": int(token)}
    if keyword == "WITHINDEXSUFFIX":
        suffix = token.strip("'") if token.type == "STRING" else str(token)
        try:
            strftime_format(suffix)
        except PatternError as exc:
            at = (token.column or 1) + exc.offset + (token.type == "STRING")
            raise located(text, (token.line or 1, at), f"WITHINDEXSUFFIX {suffix}: {exc.why}") from exc
        return {"index_suffix": suffix}
    if keyword == "STOREAS":
        return {"store_as": unquote(token).upper()}
    if keyword == "WITHFORMAT":
        if (fmt := _FORMATS.get(unquote(token).upper())) is None:
            raise located(text, token, f"unknown format '{token}'; expected JSON or AVRO")
        return {"format": fmt}
    return {"properties": _properties(text, node)}


def _properties(text: str, node: Tree[Token]) -> dict[str, str]:
    properties: dict[str, str] = {}
    for prop in node.children:
        if isinstance(prop, Tree):
            key, value = (leaf(word).strip("'") for word in prop.children)
            if key in properties:
                raise located(text, prop.meta, f"property '{key}' given twice")
            properties[key] = value
    return properties


def _selected(path: FieldPath, fields: tuple[FieldRef, ...]) -> bool:
    """Whether ``path`` lies inside what the SELECT list takes from the record."""
    return any(path[: len(f.path)] == f.path and (len(path) > len(f.path) or not f.wildcard) for f in fields)
