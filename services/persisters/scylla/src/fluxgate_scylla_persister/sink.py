"""``ScyllaSink``: prepared INSERTs, token-aware, a bounded number in flight, failures per item.

Each item is bound on the asyncio thread (a value its column cannot hold fails there,
that item only), then executed through the :class:`~fluxgate_scylla_persister.pump.Pump`.
A statement that fails is reported on its own; the rest of the batch is written. When
nothing of a batch was written and the store was away (no host, timeouts, unavailable
replicas), the whole batch is :class:`StoreUnavailable` and the runner waits for ``ping``.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from cassandra.metadata import protect_name
from prometheus_client import Counter

from fluxgate_core.errors import FluxgateError, SettingRefused
from fluxgate_core.serde import wire_schema_id
from fluxgate_scylla_persister.driver import Cluster, describe, is_transient, make_cluster, refusal
from fluxgate_scylla_persister.grouping import Rows, group_statement, partition_groups, rewritten_after, waves
from fluxgate_scylla_persister.key_deletes import KeyDelete
from fluxgate_scylla_persister.pump import Pump
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.table import (
    UNKNOWN_TYPE,
    Layout,
    RowBinder,
    TableName,
    autocreate_layout,
    column_changes,
    json_insert_column,
    table_name,
)
from fluxgate_sink.errors import KcqlError, SinkError, StoreUnavailable
from fluxgate_sink.sink import ItemFailure, Sink, SinkItem

if TYPE_CHECKING:
    from cassandra.cluster import Session
    from cassandra.query import PreparedStatement

    from fluxgate_sink.formats import HeaderFormat
    from fluxgate_sink.kcql import Statement

log = structlog.get_logger(__name__)
PING = "SELECT release_version FROM system.local"
#: A writer schema id -> that schema's fields (name -> Avro type); raises when the registry fails.
WriterFields = Callable[[int], Mapping[str, Any]]
REQUESTS = Counter(
    "fluxgate_scylla_requests_total", "Requests sent: one row, or the rows of one partition as a batch", ["kind"]
)
DELETES = Counter(
    "fluxgate_scylla_rows_deleted_total",
    "Rows deleted: records whose non-key fields are all null, under Stream-Reactor 10.x's deletesEnabled, and "
    "tombstones under scylla.delete_statement (a delete of a partition, a range or cells counts once)",
)
#: Python's own refusals of a value for a column: binding it again can never help. The driver
#: binds a text column with ``value.encode``, so a number there fails with AttributeError.
BIND_ERRORS = (TypeError, ValueError, OverflowError, AttributeError, struct.error, UnicodeError)


@dataclass(frozen=True)
class Writer:
    """The prepared INSERT of one statement's table (and its DELETE, when records may delete
    rows), and how items become their values."""

    prepared: PreparedStatement
    binder: RowBinder
    clustering: tuple[int, ...]  # positions of the clustering columns among the INSERT's values
    delete: PreparedStatement | None = None
    delete_clustering: tuple[int, ...] = ()  # and among the DELETE's

    def row_key(self, bound: Any) -> tuple[Any, Any]:
        """(partition, row) of a bound INSERT or DELETE: the table with the routing key, and the
        clustering values; already serialized, so this costs no encoding."""
        values = bound.values
        positions = self.delete_clustering if bound.prepared_statement is self.delete else self.clustering
        return (self.binder.name, bound.routing_key), tuple(values[i] for i in positions)

    def bind(self, item: SinkItem) -> Any:
        binder = self.binder
        if self.delete is not None and binder.deleted(item):
            return routed(self.delete.bind(binder.key_values(item)), binder.name)
        return routed(self.prepared.bind(binder.values(item)), binder.name)

    def deletes(self, bound: Any) -> bool:
        return bound.prepared_statement is self.delete


@dataclass(frozen=True)
class KeyDeleter:
    """``scylla.delete_statement`` prepared on its table (key_deletes): what a tombstone runs,
    bound and keyed as a :class:`Writer` binds and keys its rows; a delete of a partition or a
    range keyed as the :class:`Rows` it covers."""

    prepared: PreparedStatement
    delete: KeyDelete
    name: TableName
    clustering: tuple[int, ...]  # positions of the clustering columns it names among its values
    whole_rows: bool  # it names every clustering column: one row (or its cells)

    def bind(self, item: SinkItem) -> Any:
        return routed(self.prepared.bind(self.delete.values(item)), self.name)

    def row_key(self, bound: Any) -> tuple[Any, Any]:
        clustering = tuple(bound.values[i] for i in self.clustering)
        return (self.name, bound.routing_key), clustering if self.whole_rows else Rows(clustering)

    def deletes(self, bound: Any) -> bool:
        return True


def routed(bound: Any, name: TableName) -> Any:
    """``bound``, its routing key computed now, not inside the driver: a key component longer
    than a key may be fails this item here, with a message that says so."""
    try:
        _ = bound.routing_key
    except struct.error as exc:
        raise SinkError(f"{name}: a partition key value longer than 65535 bytes, the most a key takes") from exc
    return bound


class ScyllaSink(Sink):
    """Writes :class:`SinkItem` batches to Scylla or Cassandra with cassandra-driver."""

    name = "scylla"

    def __init__(
        self,
        settings: ConnectionSettings,
        cluster: Cluster | None = None,
        writer_fields: WriterFields | None = None,
        header_format: HeaderFormat = "simple",
    ) -> None:
        self._settings = settings
        self._header_format = header_format  # the sink's (sink.header_format): a header column's type
        self._cluster = cluster or make_cluster(settings)
        self._writer_fields = writer_fields
        self._schemas: dict[int, Mapping[str, Any]] = {}
        self._widening = threading.Lock()  # one ALTER TABLE at a time, whatever the batches in flight
        self._session: Session | None = None
        self._pump: Pump | None = None
        self._writers: dict[Statement, Writer] = {}
        self._key_delete = settings.key_delete()
        self.reads_tombstone_keys = self._key_delete is not None
        self._deleter: KeyDeleter | None = None
        self._closed = False

    @property
    def session(self) -> Session:
        if self._session is None:
            raise RuntimeError("setup() first")
        return self._session

    async def setup(self, statements: Sequence[Statement]) -> None:
        """Connect, create keyspaces and tables where AUTOCREATE says so, prepare one INSERT per
        statement. A failed setup closes the cluster: the process is about to exit."""
        try:
            await asyncio.to_thread(self._setup, statements)
        except (SinkError, KcqlError, SettingRefused):
            await self.close()
            raise

    def _setup(self, statements: Sequence[Statement]) -> None:
        where = f"{', '.join(self._settings.contact_points)}:{self._settings.port}"
        try:
            self._session = self._cluster.connect()
        except Exception as exc:
            # A refused login or TLS handshake is a setting to fix, not an outage to wait out.
            raise refusal(exc, self._settings) or StoreUnavailable(
                f"Scylla/Cassandra at {where} does not answer: {describe(exc)}"
            ) from exc
        hosts = self._cluster.metadata.all_hosts()
        log.info("scylla.connected", hosts=where, cluster=self._cluster.metadata.cluster_name, nodes=len(hosts))
        for statement in statements:
            self._writers[statement] = self._prepare(statement)
        if self._key_delete is not None:
            self._deleter = self._prepare_delete(self._key_delete)
        self._pump = Pump(self._session, self._settings.max_in_flight, self._settings.request_timeout_s)

    def _prepare(self, statement: Statement) -> Writer:
        name = table_name(statement.target, self._settings.keyspace, self._settings.column_match)
        if statement.autocreate:
            wanted = autocreate_layout(statement, name, self._header_format)
            self._create(wanted)
            # The table as it is (made earlier, maybe widened since): its columns, plus any the
            # statement selects that it lacks.
            self._cluster.refresh_table_metadata(name.keyspace, name.table)
            have = self._columns(name)
            for column, cql in wanted.columns.items():
                if column not in have and (why := self._add_column(name, column, cql)):
                    raise SinkError(why)
        return self._writer(statement, name)

    def _writer(self, statement: Statement, name: TableName, refused: Mapping[str, str] | None = None) -> Writer:
        layout = self._existing(name)
        binder = RowBinder(
            name,
            list(layout.columns),
            statement,
            refused,
            self._settings.column_match,
            self._settings.default_value,
            layout.columns,
            self._header_format,
        )
        binder.check_selected(statement, (*layout.partition_key, *layout.clustering))
        ttl = statement.ttl
        if self._settings.column_match == "stream-reactor-10":
            # 10.x's TTL and consistency are PROPERTIES (table.stream_reactor_10_options); the
            # persister writes every statement at scylla.consistency, which fluxgate connect sets.
            ttl, options = binder.options.ttl, binder.options
            if options.consistency_given and options.consistency != self._settings.consistency:
                raise KcqlError(
                    f"{statement.text}: PROPERTIES(consistencyLevel={options.consistency}): scylla-persister writes "
                    f"at FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY={self._settings.consistency}: "
                    f"set it to {options.consistency}"
                )
        prepared = self._ddl(layout.insert_cql(ttl, timestamped=binder.timestamped), name, prepare=True)
        columns = list(layout.columns)
        clustering = tuple(columns.index(c) for c in layout.clustering)
        if not binder.deletes:
            return Writer(prepared, binder, clustering)
        delete = self._ddl(layout.delete_cql(), name, prepare=True)
        after_key = 1 + len(layout.partition_key)  # the write time, then the partition key
        return Writer(prepared, binder, clustering, delete, tuple(range(after_key, after_key + len(clustering))))

    def _prepare_delete(self, delete: KeyDelete) -> KeyDeleter:
        """The DELETE of ``scylla.delete_statement`` on its table, which must exist and hold what it
        names: a row, its cells, a partition or a range of its rows (KeyDelete.scope)."""
        keyspace = delete.keyspace or self._settings.keyspace
        if delete.keyspace is None and self._settings.column_match == "stream-reactor":
            keyspace = keyspace.lower()  # as table_name folds the default keyspace of a KCQL target
        name = TableName(keyspace, delete.table)
        setting = ("scylla.delete_statement",)
        try:
            layout = self._existing(name)
        except SinkError:
            raise SettingRefused(f"its table {name} does not exist", setting) from None
        try:
            named = delete.scope(layout.partition_key, layout.clustering)
        except ValueError as exc:
            raise SettingRefused(f"{name}: {exc}", setting) from None
        if unknown := [column for column in delete.cells if column not in layout.columns]:
            raise SettingRefused(f"it deletes {', '.join(unknown)}, not a column of {name}", setting)
        cells = ", ".join(protect_name(column) for column in delete.cells)
        where = " AND ".join(f"{protect_name(column)} = ?" for column in delete.columns)
        cql = f"DELETE {cells + ' ' if cells else ''}FROM {name} WHERE {where}"
        prepared = self._ddl(cql, name, prepare=True)
        clustering = tuple(delete.columns.index(column) for column in layout.clustering[:named])
        return KeyDeleter(prepared, delete, name, clustering, whole_rows=named == len(layout.clustering))

    def _columns(self, name: TableName) -> dict[str, str]:
        """The table's columns as the driver's schema metadata has them now (kept current by the
        cluster's schema events): column -> CQL type."""
        keyspace = self._cluster.metadata.keyspaces.get(name.keyspace)
        table = keyspace.tables.get(name.table) if keyspace else None
        return {column: meta.cql_type for column, meta in table.columns.items()} if table else {}

    def _add_column(self, name: TableName, column: str, cql: str) -> str | None:
        """``ALTER TABLE ... ADD``; None once the table has the column, else why not. Another
        persister adding it first ("conflicts with an existing column", "already exists") is no
        error: the table's metadata, refreshed, is what decides."""
        try:
            self.session.execute(f"ALTER TABLE {name} ADD {protect_name(column)} {cql}")
            error: BaseException | None = None
        except Exception as exc:
            error = exc
        self._cluster.refresh_table_metadata(name.keyspace, name.table)
        found = self._columns(name).get(column)
        if found is not None:
            log.info("scylla.column_added", table=str(name), column=column, type=found, by_us=error is None)
            return None
        if error is not None and is_transient(error):
            raise StoreUnavailable(f"{name}: adding column {column}: {describe(error)}") from error
        return f"{column}: not a column of {name}, and adding it failed: {describe(error) if error else 'not seen'}"

    def _create(self, layout: Layout) -> None:
        strategy, factor = self._settings.replication_strategy, self._settings.replication_factor
        if strategy == "SimpleStrategy":
            replication = f"'class': 'SimpleStrategy', 'replication_factor': {factor}"
        else:
            datacenters = sorted({host.datacenter for host in self._cluster.metadata.all_hosts() if host.datacenter})
            per_dc = [f"'{dc}': {factor}" for dc in datacenters]
            replication = ", ".join(["'class': 'NetworkTopologyStrategy'", *per_dc])
        keyspace = protect_name(layout.name.keyspace)
        # Only when it is missing: CREATE KEYSPACE, even IF NOT EXISTS, needs CREATE on every
        # keyspace, which a role held to its own keyspace (CREATE on it alone) does not have.
        if layout.name.keyspace not in self._cluster.metadata.keyspaces:
            self._ddl(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{{replication}}}", layout.name)
        self._ddl(layout.create_cql(), layout.name)
        log.info("scylla.table", table=str(layout.name), key=layout.partition_key, clustering=layout.clustering)

    def _existing(self, name: TableName) -> Layout:
        keyspace = self._cluster.metadata.keyspaces.get(name.keyspace)
        table = keyspace.tables.get(name.table) if keyspace else None
        if table is None:
            raise SinkError(f"table {name} does not exist: create it, or add AUTOCREATE to the KCQL statement")
        return Layout(
            name,
            {column: meta.cql_type for column, meta in table.columns.items()},
            tuple(c.name for c in table.partition_key),
            tuple(c.name for c in table.clustering_key),
        )

    def _ddl(self, cql: str, name: TableName, *, prepare: bool = False) -> Any:
        try:
            return self.session.prepare(cql) if prepare else self.session.execute(cql)
        except Exception as exc:
            error = StoreUnavailable if is_transient(exc) else SinkError
            raise error(f"{name}: {cql}: {describe(exc)}") from exc

    async def write_batch(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        if self._pump is None:
            raise RuntimeError("setup() first")
        if missing := self._missing_columns(items):
            await asyncio.to_thread(self._widen, missing)
        failures: list[ItemFailure] = []
        bound: list[Any] = []
        positions: list[int] = []
        keys: list[tuple[Any, Any]] = []
        deletes: list[bool] = []
        for index, item in enumerate(items):
            writer: Writer | KeyDeleter = self._writers[item.statement]
            if self._deleter is not None and item.source.record is None:  # a tombstone
                writer = self._deleter
            try:
                bound.append(writer.bind(item))
            except SinkError as exc:
                failures.append(ItemFailure(index, exc))
                continue
            except BIND_ERRORS as exc:
                error = SinkError(f"{item.target}: a value its column cannot hold: {describe(exc)}", retriable=False)
                failures.append(ItemFailure(index, error))
                continue
            positions.append(index)
            keys.append(writer.row_key(bound[-1]))
            deletes.append(writer.deletes(bound[-1]))
        errors = await self._written(bound, keys)
        if True in deletes:
            DELETES.inc(sum(error is None for error, delete in zip(errors, deletes, strict=True) if delete))
        return outcome(items, dict(zip(positions, errors, strict=True)), failures)

    async def _written(self, bound: Sequence[Any], keys: Sequence[tuple[Any, Any]]) -> list[BaseException | None]:
        """Write ``bound``, a partition's rows to a batch; each row's error, or None. A batch the
        server refuses (a bad row in it, a batch over the fail threshold) is written again one
        row per statement, so its good rows are written and each bad row fails with its own
        reason; a batch that timed out or found no replica fails each of its rows with that."""
        assert self._pump is not None
        groups = partition_groups(keys, self._settings.partition_batch_rows)
        statements = [group_statement([bound[i] for i in group]) for group in groups]
        sent = await self._in_order(statements, [[keys[i] for i in group] for group in groups])
        batches = sum(len(group) > 1 for group in groups)
        REQUESTS.labels("batch").inc(batches)
        REQUESTS.labels("row").inc(len(groups) - batches)
        errors: list[BaseException | None] = [None] * len(bound)
        again: list[int] = []
        for group, error in zip(groups, sent, strict=True):
            if error is not None and len(group) > 1 and not is_transient(error):
                log.info("scylla.batch_refused", rows=len(group), reason=describe(error))
                again.extend(group)
                continue
            for position in group:
                errors[position] = error
        if again:
            # A later version of a row sent in a later group must stay the later write.
            later = [p for p in rewritten_after(keys, again) if errors[p] is None]
            rows = sorted(again) + later
            REQUESTS.labels("row").inc(len(rows))
            again_sent = await self._in_order([bound[i] for i in rows], [[keys[i]] for i in rows])
            for position, error in zip(rows, again_sent, strict=True):
                errors[position] = error
        return errors

    async def _in_order(self, statements: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[BaseException | None]:
        """Run ``statements`` (each writing ``rows[i]``), a row's later versions after its earlier
        ones are written (grouping.waves); each statement's error, or None."""
        assert self._pump is not None
        errors: list[BaseException | None] = [None] * len(statements)
        for wave in waves(rows):
            for position, error in zip(wave, await self._pump.run([statements[i] for i in wave]), strict=True):
                errors[position] = error
        return errors

    def _missing_columns(self, items: Sequence[SinkItem]) -> dict[Statement, dict[str, int | None]]:
        """Per statement, the fields of ``items`` its table has no column for, each with the
        schema id of a record that carries it (None: not Avro)."""
        missing: dict[Statement, dict[str, int | None]] = {}
        for item in items:
            if item.source.record is None:  # a tombstone deletes: it has no field to add a column for
                continue
            binder = self._writers[item.statement].binder
            try:
                row = binder.row(item)
            except SinkError:
                continue  # fails alone when bound
            if not binder.known.issuperset(row):
                fields = missing.setdefault(item.statement, {})
                for column in row.keys() - binder.known - fields.keys():
                    fields[column] = schema_id(item.source.value)
        return missing

    def _widen(self, missing: Mapping[Statement, Mapping[str, int | None]]) -> None:
        """Make the tables take the fields ``missing`` where AUTOCREATE allows, then prepare each
        statement again on its table's columns; the fields left are refused, with the reason."""
        with self._widening:
            for statement, fields in missing.items():
                name = self._writers[statement].binder.name
                have = self._columns(name)
                absent = {f: self._avro_type(sid, f) for f, sid in fields.items() if f not in have}
                changes = column_changes(absent, name, autocreate=statement.autocreate)
                refused = dict(changes.refused)
                for column, cql in changes.add.items():
                    if why := self._add_column(name, column, cql):
                        refused[column] = why
                binder = self._writers[statement].binder
                for column, why in refused.items():
                    if column not in binder.refused:  # one warning per field, not one per record
                        log.warning("scylla.field_refused", table=str(name), field=column, reason=why)
                refused = {**binder.refused, **refused}
                if set(self._columns(name)) != binder.known:  # widened, by us or by anyone: prepare again
                    self._writers[statement] = self._writer(statement, name, refused)
                else:
                    binder.refused.update(refused)

    def _avro_type(self, schema: int | None, field: str) -> Any:
        if schema is None or self._writer_fields is None:
            return UNKNOWN_TYPE
        if schema not in self._schemas:
            try:
                self._schemas[schema] = self._writer_fields(schema)
            except Exception as exc:  # the record decoded a moment ago: the registry will answer again
                raise StoreUnavailable(f"schema registry, fetching schema id {schema}: {describe(exc)}") from exc
        fields = self._schemas[schema]
        if field not in fields and self._settings.column_match == "stream-reactor":  # field is a folded column
            fields = {json_insert_column(name): avro for name, avro in fields.items()}
        return fields.get(field, UNKNOWN_TYPE)

    def needs_ids(self, statement: Statement) -> bool:
        """Never: a row is keyed by the table's primary key, bound from its columns, not by the item's
        id. Without a PK clause the router then makes no id per record and, for SELECT *, hands the
        decoded records on at once (kcql_routing._Plan.whole_items)."""
        return False

    def takes_tombstones(self, statement: Statement) -> bool:
        """Where records delete rows (Stream-Reactor 10.x's deletesEnabled), a tombstone deletes
        the row its key names: DataStax's connector reads it as a record of the key's fields alone
        (KeyValueRecord), none of them mapped to a non-key column, so RecordMapper.isInsertUpdate
        makes it a DELETE. Under ``scylla.delete_statement`` (the older sinks' delete.enabled) every
        tombstone runs it. Anywhere else it is dead-lettered, as a value that does not decode."""
        writer = self._writers.get(statement)
        return self._key_delete is not None or (writer is not None and writer.delete is not None)

    async def ping(self) -> bool:
        if self._session is None:
            return False
        try:
            await asyncio.to_thread(self._session.execute, PING, timeout=self._settings.request_timeout_s)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._cluster.shutdown)


def schema_id(value: bytes) -> int | None:
    """The writer schema id of a Confluent wire-format value; None for any other value."""
    try:
        return wire_schema_id(value)
    except FluxgateError:
        return None


def outcome(
    items: Sequence[SinkItem], sent: dict[int, BaseException | None], refused: list[ItemFailure]
) -> list[ItemFailure]:
    """The batch's failures, in item order: ``refused`` while binding, plus each sent
    statement's error (item index -> exception, None when written). Nothing written and the
    store away (no host, timeouts) is the whole batch's :class:`StoreUnavailable`."""
    failed = {index: error for index, error in sent.items() if error is not None}
    if failed and len(failed) == len(sent) and any(is_transient(e) for e in failed.values()):
        raise StoreUnavailable(f"nothing of {len(items)} written: {describe(next(iter(failed.values())))}")
    failures = list(refused)
    for index, cause in failed.items():
        error = SinkError(f"{items[index].target}: {describe(cause)}", retriable=is_transient(cause))
        failures.append(ItemFailure(index, error))
    return sorted(failures, key=lambda failure: failure.index)
