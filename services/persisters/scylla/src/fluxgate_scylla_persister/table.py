"""From a KCQL statement to a table: its layout, the CQL that creates it, and its rows.

The table AUTOCREATE makes answers "the aggregates of one device over a time range":

    CREATE TABLE fluxgate.temperature_aggregates (
        device_id text, metric text, day date, window_start timestamp, ...,
        PRIMARY KEY ((device_id, metric, day), window_start)
    ) WITH CLUSTERING ORDER BY (window_start DESC)

The partition key is the statement's PK without its event-time field, plus ``day``, the
UTC date of the event time (a device's partition grows by one day and no more); the
event-time field clusters the rows, newest first. Every write is an ``INSERT`` by that
primary key: an upsert, so writing a record again changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from cassandra.metadata import protect_name
from cassandra.query import UNSET_VALUE

from fluxgate_scylla_persister.consumed import CQL_TYPES, cql_type
from fluxgate_scylla_persister.text_values import Coerce, coerced, text_coercion
from fluxgate_sink.errors import KcqlError, SinkError
from fluxgate_sink.formats import HeaderFormat
from fluxgate_sink.kcql import (
    DEFAULT_PK,
    EVENT_TIME_PROPERTY,
    HEADER_PREFIX,
    FieldPath,
    FieldRef,
    Statement,
    header_text,
)
from fluxgate_sink.sink import SinkItem

DAY = "day"
# CassandraSettings.scala's CassandraNamePattern (Stream-Reactor 10.x), for the KCQL target's names.
_CASSANDRA_10_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,47}")
DEFAULT_EVENT_TIME = "window_start"
#: A field's writer type when the record's writer schema is not known (not Avro, no registry).
UNKNOWN_TYPE = object()
#: How a record's fields find their columns: ``fluxgate`` by exact name (our services),
#: ``stream-reactor`` as the older Cassandra sinks' JSON insert does (:func:`json_insert_column`), or
#: ``stream-reactor-10`` as Stream-Reactor 10.x's sink (DataStax's connector) maps them: by exact name,
#: only the fields a SELECT names, every primary-key column mapped (:meth:`RowBinder.check_selected`).
ColumnMatch = Literal["fluxgate", "stream-reactor", "stream-reactor-10"]
#: What a column a record leaves empty gets: Stream-Reactor's connect.cassandra.default.value values.
DefaultValue = Literal["UNSET", "NULL"]


@dataclass(frozen=True)
class TableName:
    keyspace: str
    table: str

    def __str__(self) -> str:
        return f"{protect_name(self.keyspace)}.{protect_name(self.table)}"


def table_name(target: str, default_keyspace: str, match: ColumnMatch = "fluxgate") -> TableName:
    """``keyspace.table``, or ``table`` in the default keyspace: as written (``fluxgate``), or
    lower-cased (``stream-reactor``), as CQL folds the unquoted names of Stream-Reactor's
    ``INSERT INTO <keyspace>.<table> JSON ?`` (CassandraJsonWriter.scala). Stream-Reactor 10.x
    (``stream-reactor-10``) has no default keyspace and takes both names as written, each a letter
    then up to 47 letters, digits or underscores (CassandraSettings.scala, fromKcql and
    validateCassandraName; DataStax's TableConfig.parseLoosely: an unquoted name is exact)."""
    keyspace, _, table = target.rpartition(".")
    if "." in keyspace or not table:
        raise KcqlError(f"target {target!r}: expected keyspace.table or table")
    if match == "stream-reactor-10":
        if not keyspace:
            raise KcqlError(f"{target}: Stream-Reactor 10.x needs keyspace.table as the KCQL target")
        bad = [n for n in (keyspace, table) if not _CASSANDRA_10_NAME.fullmatch(n)]
        if bad:
            raise KcqlError(
                f"{target}: {', '.join(bad)}: Stream-Reactor 10.x takes a keyspace or table name of a letter, "
                "then letters, digits or _, 48 at most"
            )
    name = TableName(keyspace or default_keyspace, table)
    return TableName(name.keyspace.lower(), name.table.lower()) if match == "stream-reactor" else name


@dataclass(frozen=True)
class Layout:
    """Columns (name -> CQL type, in order), partition key and clustering columns."""

    name: TableName
    columns: Mapping[str, str]
    partition_key: tuple[str, ...]
    clustering: tuple[str, ...]

    def create_cql(self) -> str:
        columns = ", ".join(f"{protect_name(c)} {t}" for c, t in self.columns.items())
        partition = ", ".join(protect_name(c) for c in self.partition_key)
        clustering = "".join(f", {protect_name(c)}" for c in self.clustering)
        order = ", ".join(f"{protect_name(c)} DESC" for c in self.clustering)
        cql = f"CREATE TABLE IF NOT EXISTS {self.name} ({columns}, PRIMARY KEY (({partition}){clustering}))"
        return cql + (f" WITH CLUSTERING ORDER BY ({order})" if order else "")

    @property
    def primary_key(self) -> tuple[str, ...]:
        return (*self.partition_key, *self.clustering)

    def insert_cql(self, ttl: int | None, *, timestamped: bool = False) -> str:
        """The INSERT of every column; ``timestamped``: its write time is a last bind marker."""
        names = ", ".join(protect_name(c) for c in self.columns)
        markers = ", ".join("?" for _ in self.columns)
        using = [*(["TIMESTAMP ?"] if timestamped else []), *([f"TTL {ttl}"] if ttl else [])]
        clause = f" USING {' AND '.join(using)}" if using else ""
        return f"INSERT INTO {self.name} ({names}) VALUES ({markers}){clause}"  # noqa: S608 - names are quoted

    def delete_cql(self) -> str:
        """The DELETE of one row: its write time, then the primary key's columns, as bind markers."""
        where = " AND ".join(f"{protect_name(c)} = ?" for c in self.primary_key)
        return f"DELETE FROM {self.name} USING TIMESTAMP ? WHERE {where}"  # noqa: S608 - names are quoted


def autocreate_layout(statement: Statement, name: TableName, header_format: HeaderFormat = "simple") -> Layout:
    """The table AUTOCREATE makes for ``statement``: TemperatureAggregate's columns as projected."""
    columns = {**projected_columns(statement, header_format), DAY: "date"}
    event = column_of(statement, tuple(statement.properties.get(EVENT_TIME_PROPERTY, DEFAULT_EVENT_TIME).split(".")))
    keys = [column_of(statement, path) for path in (statement.pk or (*DEFAULT_PK, (DEFAULT_EVENT_TIME,)))]
    if event not in keys:
        raise KcqlError(f"{statement.text}: AUTOCREATE clusters by the event time, so PK must include {event}")
    missing = [column for column in keys if column not in columns]
    if missing:
        raise KcqlError(f"{statement.text}: PK column(s) {', '.join(missing)} are not selected")
    partition = (*(k for k in keys if k != event), DAY)
    return Layout(name, columns, partition, (event,))


#: CQL types a header's text is written to as it is (RowBinder), whatever type its value reads as.
TEXT_TYPES = frozenset({"text", "varchar", "ascii"})


def header_columns(statement: Statement, column: Callable[[str], str] = str) -> list[tuple[str, str]]:
    """(column, header name) of each header the SELECT names (``_header.<name> [AS column]``)."""
    return [
        (column(ref.alias or ref.path[-1]), ".".join(ref.path[1:])) for ref in statement.fields if _names_header(ref)
    ]


def _names_header(ref: FieldRef) -> bool:
    """Whether a SELECT entry is one header, ``_header.<name>``."""
    return not ref.wildcard and len(ref.path) > 1 and ref.path[0] == HEADER_PREFIX


#: The column AUTOCREATE makes for a header (``_header.<name>``), by the sink's header format: the CQL
#: type of the Connect type its converter gives (ByteArrayConverter's BYTES a blob, LongConverter's
#: INT64 a bigint ...). Any other is text: SimpleHeaderConverter types each header from its text, record
#: by record, and a text column takes that text (RowBinder); StringConverter gives text; JsonConverter's
#: JSON may be any value, and a text column takes a JSON string as a value field's.
HEADER_COLUMN_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "bytearray": "blob",
        "long": "bigint",
        "integer": "int",
        "short": "smallint",
        "float": "float",
        "double": "double",
        "boolean": "boolean",
    }
)


def projected_columns(statement: Statement, header_format: HeaderFormat = "simple") -> dict[str, str]:
    """The columns SELECT/AS/IGNORE make of a TemperatureAggregate, with their CQL types; a
    header's (``_header.<name>``) is :data:`HEADER_COLUMN_TYPES`'s for ``header_format``."""
    ignored = {path[0] for path in statement.ignore if len(path) == 1}
    columns: dict[str, str] = {}
    for ref in statement.fields:
        if ref.wildcard and not ref.path:
            columns.update({n: t for n, t in CQL_TYPES.items() if n not in ignored})
        elif not ref.wildcard and len(ref.path) == 1 and ref.path[0] in CQL_TYPES:
            columns[ref.alias or ref.path[0]] = CQL_TYPES[ref.path[0]]
        elif _names_header(ref):
            columns[ref.alias or ref.path[-1]] = HEADER_COLUMN_TYPES.get(header_format, "text")
        else:
            shown = ".".join(ref.path) + (".*" if ref.wildcard else "")
            raise KcqlError(f"{statement.text}: AUTOCREATE knows TemperatureAggregate's fields, not {shown}")
    if DAY in columns:
        raise KcqlError(f"{statement.text}: '{DAY}' is the partition column AUTOCREATE adds; rename that field")
    return columns


def column_of(statement: Statement, path: FieldPath) -> str:
    """The column a record field lands in: its alias if the SELECT gives one."""
    for ref in statement.fields:
        if not ref.wildcard and ref.path == path:
            return ref.alias or path[-1]
    return path[-1]


@dataclass(frozen=True)
class ColumnChanges:
    """What the fields of a record the table has no column for become."""

    add: dict[str, str] = field(default_factory=dict)  # column -> CQL type, to ALTER TABLE ... ADD
    refused: dict[str, str] = field(default_factory=dict)  # field -> why its record fails


def column_changes(missing: Mapping[str, Any], name: TableName, *, autocreate: bool) -> ColumnChanges:
    """The decision for the fields ``missing`` from table ``name`` (field -> its writer's Avro type,
    or UNKNOWN_TYPE). With AUTOCREATE, a field whose type maps (as AUTOCREATE maps the others)
    gets a column; any other fails its record, saying why.

    Without AUTOCREATE the field fails its record, as Stream-Reactor's Cassandra sink does: it
    writes each record with Cassandra's JSON insert, which refuses a field that is no column, and
    that failure goes to the error policy (https://docs.lenses.io/connectors/kafka-connectors/sinks/cassandra).
    """
    changes = ColumnChanges()
    for column, avro_type in missing.items():
        found = None if avro_type is UNKNOWN_TYPE else cql_type(avro_type)
        if not autocreate:
            changes.refused[column] = plain_refusal(column, name)
        elif found is None:
            why = "the record's writer schema is unknown" if avro_type is UNKNOWN_TYPE else (
                f"its Avro type {json.dumps(avro_type)} has no CQL type"
            )  # fmt: skip
            changes.refused[column] = f"{column}: not a column of {name}, and AUTOCREATE cannot add it: {why}; {ADVICE}"
        else:
            changes.add[column] = found
    return changes


ADVICE = "add the column or IGNORE the field in KCQL"


def json_insert_column(key: str) -> str:
    """The column Cassandra's ``INSERT INTO t JSON ?`` writes the key ``key`` into, the way
    Stream-Reactor's Cassandra sink writes every record (CassandraJsonWriter.scala: the record, as
    ToJsonWithProjections.scala makes it JSON, keys named as the fields or their SELECT aliases).
    Cassandra decides (Json.handleCaseSensitivity, apache/cassandra cql3/Json.java): a key in
    double quotes names its column exactly, quotes removed; any other is lower-cased (Locale.US),
    as CQL folds an unquoted name. Python's ``str.lower`` is Java's for all but a few
    locale-sensitive letters, which no column name of ours holds."""
    if len(key) >= 2 and key.startswith('"') and key.endswith('"'):
        return key[1:-1]
    return key.lower()


def json_insert_row(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` keyed by the columns :func:`json_insert_column` gives its fields. Two fields
    landing in one column (``DeviceId`` and ``deviceid``) fail the record: which one Cassandra keeps
    depends on its version (some replace key by key in order, others dequote every key first)."""
    row: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in document.items():
        column = json_insert_column(key)
        if column in origin:
            raise SinkError(f"{origin[column]}, {key}: both fields go to column {column}; rename one (KCQL AS)")
        origin[column], row[column] = key, value
    return row


class RowBinder:
    """Turns an item into the values of the table's prepared INSERT, in column order.

    With ``default_value`` UNSET (ours), a column the document lacks is left as it is (``UNSET``,
    not a tombstone); under ``UPSERT`` so is a null field, which merges a record into the row
    instead of clearing columns. With NULL (Stream-Reactor's default), a lacking or null field
    writes null, whatever the write mode; under ``stream-reactor`` matching (a connector config)
    the write mode changes nothing either, so a null field writes null under UNSET too. ``day`` is
    the UTC date of the item's event time. A field that is no column fails that item, naming the
    field. Fields find their columns as ``match`` says: by exact
    name (``fluxgate``), as Stream-Reactor's JSON insert does (``stream-reactor``), or as its 10.x
    sink's DataStax mapping does (``stream-reactor-10``: exact names, a null field unset in any mode
    under UNSET, and the checks of :meth:`check_selected`)."""

    def __init__(
        self,
        name: TableName,
        columns: Sequence[str],
        statement: Statement,
        refused: Mapping[str, str] | None = None,
        match: ColumnMatch = "fluxgate",
        default_value: DefaultValue = "UNSET",
        types: Mapping[str, str] | None = None,
        header_format: HeaderFormat = "simple",
    ) -> None:
        self.name = name
        self.columns = tuple(columns)
        self.known = frozenset(columns)
        self.refused = dict(refused or {})  # field -> why it has no column, when more is known than "none"
        self._day = DAY in self.known
        self._upsert = statement.mode == "UPSERT"
        self.match: ColumnMatch = match
        # Stream-Reactor's Cassandra sink writes every record as INSERT INTO t JSON ?, adding DEFAULT
        # UNSET only for connect.cassandra.default.value=UNSET (CassandraJsonWriter.scala,
        # getPreparedStatement; NULL when the key is unset or not an exact name, CassandraSettings.scala's
        # DefaultValueServeStrategy.of). Cassandra's JSON insert then writes null into every column the
        # JSON lacks (DEFAULT NULL) and null for a JSON null in either case, whatever KCQL's mode: so
        # UPSERT's merge of null fields (ours) holds for our services' exact-name matching only.
        self._absent = None if default_value == "NULL" else UNSET_VALUE
        # Stream-Reactor 10.x writes a null field as unset whatever KCQL's mode (DataStax's
        # TableConfig.java, nullToUnset, default true; the connector sets UNSET for it), unless
        # PROPERTIES(nullToUnset=false) (RecordMapper.java's bindColumn then binds the null).
        self.options = stream_reactor_10_options(statement) if match == "stream-reactor-10" else TableOptions()
        self._deletes_on: tuple[str, ...] = ()  # non-key columns whose all-null a 10.x DELETE follows
        # A connector config's text into a typed column reads as its connector reads it (text_values);
        # ours are Avro, typed: bound as they are. Column -> (its CQL type, how a text becomes one).
        self._coerce: dict[str, tuple[str, Coerce]] = {}
        if match != "fluxgate":
            typed = ((c, t, text_coercion(t)) for c, t in (types or {}).items() if c in self.known)
            self._coerce = {column: (cql, coerce) for column, cql, coerce in typed if coerce is not None}
        self._coerced_at = [(self.columns.index(column), column, *how) for column, how in self._coerce.items()]
        # A header is typed as Kafka Connect's SimpleHeaderConverter types it (Statement.project: "42"
        # is 42); a text column (AUTOCREATE makes one for a header) takes the header's text instead.
        # Another header converter's value (bytes, a JSON number) is bound as a value field's is.
        self._header_text = {
            column: name
            for column, name in header_columns(statement, self.column)
            if header_format == "simple" and (types or {}).get(column) in TEXT_TYPES
        }
        self.primary_key: tuple[str, ...] = ()  # the table's, as check_selected was given it
        # Stream-Reactor 10.x writes every row at its record's timestamp (DataStax's
        # LifeCycleManager.java, makeInsertStatement: USING TIMESTAMP :kafka_internal_timestamp;
        # RecordMapper.java binds record.timestamp * 1000), so a replayed or reordered older record
        # never overwrites a newer one. Our own services keep the driver's write time.
        self.timestamped = match == "stream-reactor-10"
        self._null_unset = default_value == "UNSET" and (
            (match == "stream-reactor-10" and self.options.null_to_unset) or (self._upsert and match == "fluxgate")
        )

    def column(self, field_name: str) -> str:
        """The column a field (or a SELECT alias) is written into."""
        return json_insert_column(field_name) if self.match == "stream-reactor" else field_name

    def row(self, item: SinkItem) -> Mapping[str, Any]:
        """The item's document keyed by column; fails it when two fields go to one column."""
        return json_insert_row(item.document) if self.match == "stream-reactor" else item.document

    def values(self, item: SinkItem) -> list[Any]:
        """The INSERT's values: every column's, then the write time when :attr:`timestamped`."""
        document = self._document(item)
        if self._null_unset:
            values = [UNSET_VALUE if (v := document.get(c)) is None else v for c in self.columns]
        else:
            values = [document.get(c, self._absent) for c in self.columns]
        for at, column, cql, coerce in self._coerced_at:  # a connector config's typed columns only
            if type(value := values[at]) is str:
                values[at] = coerced(column, cql, coerce, value)
        return [*values, write_time(item)] if self.timestamped else values

    def _typed(self, column: str, value: Any) -> Any:
        found = self._coerce.get(column) if type(value) is str else None
        return value if found is None else coerced(column, found[0], found[1], value)

    @property
    def deletes(self) -> bool:
        """Whether some records delete their row (:meth:`deleted`): a DELETE is to be prepared."""
        return bool(self._deletes_on)

    def deleted(self, item: SinkItem) -> bool:
        """Whether ``item`` deletes its row instead of writing it: under Stream-Reactor 10.x's
        deletesEnabled, a record whose non-key fields are all null (:meth:`check_selected`)."""
        document = self.row(item)
        return bool(self._deletes_on) and all(document.get(c) is None for c in self._deletes_on)

    def key_values(self, item: SinkItem) -> list[Any]:
        """The DELETE's values (:meth:`Layout.delete_cql`): the write time, then the primary key's."""
        document = self._document(item)
        return [write_time(item), *(self._typed(c, document.get(c)) for c in self.primary_key)]

    def _document(self, item: SinkItem) -> Mapping[str, Any]:
        """The item's row by column, ``day`` included; fails it for a field that is no column."""
        document = self.row(item)
        if not self.known.issuperset(document):
            raise SinkError(self._why_not(set(document) - self.known))
        if self._header_text:
            document = {**document, **self._header_texts(item, document)}
        return {**document, DAY: item.event_time.date()} if self._day else document

    def _header_texts(self, item: SinkItem, document: Mapping[str, Any]) -> dict[str, Any]:
        """The text columns' headers as their text where their typed value is not text."""
        typed = ((c, h) for c, h in self._header_text.items() if document.get(c) is not None)
        return {c: header_text(item.source.headers, h) for c, h in typed if type(document[c]) is not str}

    def check_selected(self, statement: Statement, primary_key: Sequence[str] = ()) -> None:
        """Fail at start when an explicit SELECT names a field the table has no column for.

        Under ``stream-reactor-10``, also as Stream-Reactor 10.x refuses to start: it maps only the
        fields a SELECT names (CassandraSettings.scala, extractFieldMappings drops ``*``), so a
        wildcard writes nothing there (no mapping: DataStax's connector fails the config or every
        record); and DataStax's LifeCycleManager.validateMappingColumns wants every column of
        ``primary_key`` mapped."""
        self.primary_key = tuple(primary_key)
        wildcard = any(ref.wildcard for ref in statement.fields)
        if wildcard and self.match == "stream-reactor-10":
            raise KcqlError(
                f"{statement.text}: Stream-Reactor 10.x maps only the fields a SELECT names, and none for *: "
                "name each field (SELECT a, b AS c)"
            )
        if wildcard:
            return  # known per record only: checked in values()
        if self.match == "stream-reactor-10":
            refused = [why for ref in statement.fields if (why := metadata_refusal(ref.path))]
            if refused:
                raise KcqlError(f"{statement.text}: " + "; ".join(refused))
        selected = [self.column(ref.alias or ref.path[-1]) for ref in statement.fields]
        missing = [column for column in selected if column not in self.known]
        if missing:
            raise KcqlError(f"{statement.text}: {self.name} has no column {', '.join(missing)}")
        # ``day`` is written from the event time (values()), as with any match.
        unmapped = [column for column in primary_key if column not in selected and column != DAY]
        if unmapped and self.match == "stream-reactor-10":
            raise KcqlError(
                f"{statement.text}: {self.name}'s primary key column(s) {', '.join(unmapped)}: no field of the "
                "SELECT writes them (Stream-Reactor 10.x refuses to start so)"
            )
        # DataStax prepares a DELETE when deletesEnabled (default true) and the mapping covers every
        # column (LifeCycleManager.java, prepareStatementsAsync, validateMappingColumns), and runs it
        # for a record whose non-key fields are all null (RecordMapper.java, isInsertUpdate; never for
        # a table of key columns only): deleted() says which records.
        deletes = self.options.deletes_enabled and set(selected) >= self.known > frozenset(primary_key)
        if self.match == "stream-reactor-10" and deletes:
            self._deletes_on = tuple(c for c in self.columns if c not in primary_key and c != DAY)

    def _why_not(self, unknown: set[str]) -> str:
        # Without a reason of their own, fields are named together, in one sentence.
        plain = {c for c in unknown if self.refused.get(c, plain_refusal(c, self.name)) == plain_refusal(c, self.name)}
        reasons = [plain_refusal(", ".join(sorted(plain)), self.name)] if plain else []
        return "; ".join(reasons + [self.refused[column] for column in sorted(unknown - plain)])


def write_time(item: SinkItem) -> Any:
    """A row's write time under Stream-Reactor 10.x: its record's timestamp in microseconds, as
    DataStax binds it (RecordMapper.java: record.getTimestamp() * 1000); a record without one
    (Kafka's -1) leaves it unset, so the write is timed as any other (DataStax binds none then).

    Unlike DataStax, a DELETE is timed so too: DataStax's has no USING TIMESTAMP, so it is timed
    when it runs, and a later record written during a backlog (its timestamp older than that
    moment) would stay hidden behind the delete. Here the record order decides, both ways."""
    timestamp = item.source.timestamp_ms
    return timestamp * 1000 if timestamp >= 0 else UNSET_VALUE


def plain_refusal(fields: str, name: TableName) -> str:
    """Why a record with ``fields`` the table has no column for fails, without AUTOCREATE."""
    return f"{fields}: not a column of {name}; {ADVICE}"


# --- Stream-Reactor 10.x: the KCQL it hands DataStax's connector ------------------------------
# lensesio/stream-reactor kafka-connect-cassandra's io/lenses/streamreactor/connect/cassandra/
# CassandraSettings.scala (CassandraTableSetting.getExtraSettingsMappings) passes every KCQL
# PROPERTIES entry on as DataStax's topic.<topic>.<keyspace>.<table>.<key> (codec.* as
# topic.<topic>.<key>); datastax/kafka-sink sink/src/main/java/com/datastax/oss/kafka/sink/config/
# TableConfig.java and TopicConfig.java read them.

#: DataStax's consistency of a table's writes when PROPERTIES do not set one (TableConfig.java's
#: consistencyLevel default); it is set on every statement (CassandraSinkTask.java), so the Java
#: driver's own default (connect.cassandra.driver.basic.request.consistency) never applies.
STREAM_REACTOR_10_CONSISTENCY = "LOCAL_ONE"
#: Properties 10.x passes on that scylla-persister cannot honour, and what to do instead.
_REFUSED_10 = {
    "query": "a CQL statement of its own per table (DataStax's query); scylla-persister writes an INSERT of the "
    "SELECT's columns only: map each field with SELECT <field> AS <column>, and run any other CQL (UPDATE, "
    "counters, conditional writes) outside Fluxgate",
    "mapping": "replaces the SELECT's mapping (DataStax's mapping); write it as SELECT <field> AS <column>",
}
_CODEC = "codec."
_CODEC_REFUSAL = (
    "DataStax's string-to-temporal conversion option (TopicConfig.java); scylla-persister has none: remove it "
    "and send timestamps as epoch milliseconds or ISO 8601 text"
)
#: Record metadata a 10.x SELECT may name (_key.x and _header.x are the key's and a header's;
#: _value.x is the value's x: CassandraSettings.scala, getTopicMappings); fluxgate_sink.kcql's too.
_KEY, _HEADER, _VALUE = "_key", "_header", "_value"


@dataclass(frozen=True)
class TableOptions:
    """What a 10.x statement's PROPERTIES set, as TableConfig.java reads them."""

    ttl: int | None = None  # seconds; None: no TTL (DataStax's -1, and 0)
    consistency: str = STREAM_REACTOR_10_CONSISTENCY
    consistency_given: bool = False
    null_to_unset: bool = True
    deletes_enabled: bool = True


def stream_reactor_10_options(statement: Statement) -> TableOptions:
    """The PROPERTIES of a statement for Stream-Reactor 10.x; a KcqlError lists every one refused.

    Property names are exact, as DataStax's ConfigDef keys are. ``event.time.field`` is ours (10.x
    passes it on and DataStax ignores it); other keys DataStax ignores too."""
    from fluxgate_scylla_persister.settings import Consistency  # settings imports this module

    levels = get_args(Consistency)
    errors: list[str] = []
    props = statement.properties
    if statement.ttl is not None:  # CassandraSettings.scala reads PROPERTIES, never Kcql.getTTL
        errors.append(f"TTL={statement.ttl}: Stream-Reactor 10.x ignores KCQL's TTL clause: write PROPERTIES(ttl=...)")
    options: dict[str, Any] = {}
    if "ttl" in props:
        try:
            ttl = int(props["ttl"].strip())
        except ValueError:
            ttl = -2
        if ttl < -1:
            errors.append(f"ttl={props['ttl']}: an integer of at least -1 (-1: no TTL)")
        options["ttl"] = ttl if ttl > 0 else None
    # TableConfig.java: TimeUnit.valueOf(ttlTimeUnit), SECONDS by default, scales ttl (convertTtlToSeconds).
    if props.get("ttlTimeUnit", "SECONDS") != "SECONDS":
        errors.append(
            f"ttlTimeUnit={props['ttlTimeUnit']}: scylla-persister takes ttl in SECONDS only: give ttl in seconds"
        )
    if "consistencyLevel" in props:
        level = props["consistencyLevel"].upper()
        if level not in levels:  # SERIAL and LOCAL_SERIAL are for conditional writes only
            errors.append(f"consistencyLevel={props['consistencyLevel']}: one of {', '.join(levels)}")
        options |= {"consistency": level, "consistency_given": True}
    for key, option in (("nullToUnset", "null_to_unset"), ("deletesEnabled", "deletes_enabled")):
        if key in props:  # Kafka's ConfigDef BOOLEAN: true or false, any case, trimmed
            value = props[key].strip().lower()
            if value not in ("true", "false"):
                errors.append(f"{key}={props[key]}: true or false")
            options[option] = value == "true"
    for key in props:
        if key in _REFUSED_10:
            errors.append(f"{key}: not supported: {_REFUSED_10[key]}")
        elif key.startswith(_CODEC):
            errors.append(f"{key}: not supported: {_CODEC_REFUSAL}")
    if errors:
        raise KcqlError(f"{statement.text}: PROPERTIES: " + "; ".join(errors))
    return TableOptions(**options)


def metadata_refusal(path: FieldPath) -> str | None:
    """Why a 10.x SELECT entry naming record metadata cannot be written, or None when it can.

    10.x maps ``_key.x`` to DataStax's ``key.x`` (the record key's field x), ``_header.h`` to
    ``header.h`` (header h's value) and ``_value.x`` to ``value.x``, the same as ``x``
    (CassandraSettings.scala, getTopicMappings; the KCQL parser, io/lenses/kcql/Kcql.java, files
    ``_key.``/``_header.`` entries as key and header fields): the sink's projection reads them all
    (fluxgate_sink.kcql, Statement.project). A bare ``_header`` fails 10.x's start; a bare ``_value``
    is the whole value in one column there ("c"="value"), which a row of the value's fields cannot
    be; a bare ``_key`` is a value field of that name there as here."""
    if path == (_HEADER,):
        return "_header: Stream-Reactor 10.x refuses it too (a header is _header.<name>)"
    if path == (_VALUE,):
        return (
            "_value: Stream-Reactor 10.x writes the whole record value to that one column; scylla-persister "
            "writes the value's fields to columns: name them (SELECT a, b AS c or _value.a)"
        )
    return None


def nested_warning(path: FieldPath, alias: str | None) -> str | None:
    """What a nested SELECT entry (``a.b``) does on 10.x that it does not do here, or None.

    Its column is the last name, ``b``, or the alias, as here (io/lenses/kcql/Field.java: a field's
    alias is its name unless AS gives one; CassandraSettings.scala maps "b"="value.a.b"). But
    DataStax's record has only the key's and the value's top-level fields (KeyValueRecord.java, StructData.java,
    JsonData.java), so value.a.b is never among them and RecordMapper.ensureAllFieldsPresent fails
    every record; scylla-persister writes the nested value instead."""
    side, inner = ("key", path[1:]) if path[:1] == (_KEY,) else ("value", path[1:] if path[:1] == (_VALUE,) else path)
    if len(inner) < 2 or path[0] == _HEADER:  # _header.a.b is the header named "a.b", not a nested field
        return None
    dotted = ".".join(path)
    return (
        f"{dotted}: Stream-Reactor 10.x maps it to column {alias or path[-1]} as scylla-persister does, but its "
        f"DataStax mapping reads top-level fields only and fails every record with 'Required field "
        f"{side}.{'.'.join(inner)} ... was missing from record'; scylla-persister writes the nested value"
    )
