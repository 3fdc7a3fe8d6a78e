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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from cassandra.metadata import protect_name

from fluxgate_core.errors import SettingRefused
from fluxgate_scylla_persister.driver import Cluster, describe, is_transient, make_cluster, refusal
from fluxgate_scylla_persister.pump import Pump
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.table import Layout, RowBinder, TableName, autocreate_layout, table_name
from fluxgate_sink.errors import KcqlError, SinkError, StoreUnavailable
from fluxgate_sink.sink import ItemFailure, Sink, SinkItem

if TYPE_CHECKING:
    from cassandra.cluster import Session
    from cassandra.query import PreparedStatement

    from fluxgate_sink.kcql import Statement

log = structlog.get_logger(__name__)
PING = "SELECT release_version FROM system.local"
#: Python's own refusals of a value for a column: binding it again can never help.
BIND_ERRORS = (TypeError, ValueError, OverflowError, struct.error, UnicodeError)


@dataclass(frozen=True)
class Writer:
    """The prepared INSERT of one statement's table, and how items become its values."""

    prepared: PreparedStatement
    binder: RowBinder

    def bind(self, item: SinkItem) -> Any:
        bound = self.prepared.bind(self.binder.values(item))
        try:
            # Computed now, not inside the driver: a key component longer than a key may
            # be fails this item here, with a message that says so.
            _ = bound.routing_key
        except struct.error as exc:
            raise SinkError(
                f"{self.binder.name}: a partition key value longer than 65535 bytes, the most a key takes"
            ) from exc
        return bound


class ScyllaSink(Sink):
    """Writes :class:`SinkItem` batches to Scylla or Cassandra with cassandra-driver."""

    name = "scylla"

    def __init__(self, settings: ConnectionSettings, cluster: Cluster | None = None) -> None:
        self._settings = settings
        self._cluster = cluster or make_cluster(settings)
        self._session: Session | None = None
        self._pump: Pump | None = None
        self._writers: dict[Statement, Writer] = {}
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
        self._pump = Pump(self._session, self._settings.max_in_flight, self._settings.request_timeout_s)

    def _prepare(self, statement: Statement) -> Writer:
        name = table_name(statement.target, self._settings.keyspace)
        if statement.autocreate:
            layout = autocreate_layout(statement, name)
            self._create(layout)
        else:
            layout = self._existing(name)
        binder = RowBinder(name, list(layout.columns), statement)
        binder.check_selected(statement)
        prepared = self._ddl(layout.insert_cql(statement.ttl), name, prepare=True)
        return Writer(prepared, binder)

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
        failures: list[ItemFailure] = []
        bound, positions = [], []
        for index, item in enumerate(items):
            try:
                bound.append(self._writers[item.statement].bind(item))
            except SinkError as exc:
                failures.append(ItemFailure(index, exc))
                continue
            except BIND_ERRORS as exc:
                error = SinkError(f"{item.target}: a value its column cannot hold: {describe(exc)}", retriable=False)
                failures.append(ItemFailure(index, error))
                continue
            positions.append(index)
        errors = await self._pump.run(bound)
        return outcome(items, dict(zip(positions, errors, strict=True)), failures)

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
