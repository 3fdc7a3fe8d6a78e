"""Scylla (or Cassandra): rows of the recent days and the newest aggregate, without a full scan.

The scylla-persister's table is keyed ``((device_id, metric, day), window_start)``, newest
first. A ``COUNT(*)`` over the table reads every row; instead the console reads partition
keys only, bounded (``SELECT DISTINCT ... LIMIT``), to learn which series (device, metric)
exist, then asks each series' partition of each recent UTC day directly: its row count and
its first row by the event time. So the figure is "rows written for the last N days by the
series seen", exact for those, and the page says so. A table without a ``day`` partition
column is counted over the partitions the bounded scan found.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from fluxgate_console.stores import Held, StoreView, plain
from fluxgate_core.errors import SettingRefused
from fluxgate_core.store_access import ScyllaAccess, speaks_tls

NAME = "scylla"
GROUP = "scylla"  # ConsoleSettings' field: refusals name its variables
DAY = "day"
Key = tuple[Any, ...]


class ScyllaAnswers(Protocol):
    """What the console asks Scylla: the driver's (``CassandraAnswers``) or a test's."""

    def key_columns(self) -> tuple[list[str], str | None]:
        """The partition key's columns and the first clustering column (the event time)."""
        ...

    def partition_keys(self, limit: int) -> list[Key]: ...

    def counts(self, keys: Sequence[Key]) -> list[int]: ...

    def newest(self, keys: Sequence[Key], event: str) -> list[dict[str, Any] | None]: ...


def recent_keys(partition: Sequence[str], found: Sequence[Key], days: int, today: date) -> dict[str, list[Key]]:
    """Each recent day's partition keys (newest day first): every series found, at that day.
    Without a ``day`` column, the partitions found, under ``"partitions found"``."""
    if DAY not in partition:
        return {"partitions found": list(found)}
    at = partition.index(DAY)
    series = sorted({key[:at] + key[at + 1 :] for key in found}, key=repr)
    recent = [today - timedelta(days=back) for back in range(days)]
    return {day.isoformat(): [(*s[:at], day, *s[at:]) for s in series] for day in recent}


def scylla_view(answers: ScyllaAnswers, table: str, days: int, max_keys: int, today: date | None = None) -> StoreView:
    """Rows per recent day and the newest row, from ``answers`` (see the module for what they mean)."""
    at = time.time()
    partition, event = answers.key_columns()
    found = answers.partition_keys(max_keys + 1)
    by_day = recent_keys(partition, found[:max_keys], days, today or datetime.now(UTC).date())
    holds, firsts = [], []
    for label, keys in by_day.items():
        counts = answers.counts(keys)
        filled = sum(1 for n in counts if n)
        holds.append(Held(label, sum(counts), "rows", f"{filled} of {len(keys)} partitions"))
        if event:
            firsts += [row for row in answers.newest(keys, event) if row]
    newest = max(firsts, key=lambda row: row[event]) if firsts and event else None
    return StoreView(NAME, at, holds, plain(newest) if newest else None, meaning=_meaning(
        table, partition, days, max_keys, len(found), event))  # fmt: skip


def _meaning(table: str, partition: Sequence[str], days: int, max_keys: int, found: int, event: str | None) -> str:
    if found > max_keys:
        bound = f"the first {max_keys} partition keys (limit reached: at least this many)"
    else:
        bound = f"its {found} partition keys (all read)"
    if DAY in partition:
        series = ", ".join(c for c in partition if c != DAY)
        what = f"rows in {table} for the last {days} UTC day(s) of each ({series}) seen in {bound}"
    else:
        what = f"rows in the partitions of {table} found in {bound}"
    return what + (f"; newest: the latest {event} of those partitions" if event else "")


class CassandraAnswers:
    """:class:`ScyllaAnswers` from the real cluster through cassandra-driver; connects on first use."""

    def __init__(self, contact_points: list[str], port: int, table: str, timeout_s: float, **options: Any) -> None:
        self.keyspace, _, self.table = table.partition(".")
        self._contact = (contact_points, port)
        self._timeout_s, self._options = timeout_s, options
        self._cluster: Any = None
        self._session: Any = None
        self._prepared: dict[str, Any] = {}

    def session(self) -> Any:
        if self._session is None:
            from cassandra.cluster import Cluster  # heavy: imported only when Scylla is shown
            from cassandra.query import dict_factory

            points, port = self._contact
            cluster = Cluster(points, port=port, connect_timeout=self._timeout_s,
                              control_connection_timeout=self._timeout_s, **self._options)  # fmt: skip
            try:
                session = cluster.connect()
            except Exception:
                cluster.shutdown()
                raise
            session.default_timeout, session.row_factory = self._timeout_s, dict_factory
            self._cluster, self._session = cluster, session
        return self._session

    def key_columns(self) -> tuple[list[str], str | None]:
        self.session()
        keyspace = self._cluster.metadata.keyspaces.get(self.keyspace)
        table = keyspace.tables.get(self.table) if keyspace else None
        if table is None:
            raise LookupError(f"no table {self.keyspace}.{self.table} (yet)")
        clustering = table.clustering_key
        return [c.name for c in table.partition_key], clustering[0].name if clustering else None

    def partition_keys(self, limit: int) -> list[Key]:
        names = self._columns()
        rows = self.session().execute(f"SELECT DISTINCT {names} FROM {self._name()} LIMIT {int(limit)}")  # noqa: S608
        return [tuple(row.values()) for row in rows]

    def counts(self, keys: Sequence[Key]) -> list[int]:
        rows = self._each(f"SELECT COUNT(*) AS n FROM {self._name()} WHERE {self._where()}", keys)  # noqa: S608
        return [int(found[0]["n"]) if found else 0 for found in rows]

    def newest(self, keys: Sequence[Key], event: str) -> list[dict[str, Any] | None]:
        from cassandra.metadata import protect_name

        cql = f"SELECT * FROM {self._name()} WHERE {self._where()} ORDER BY {protect_name(event)} DESC LIMIT 1"  # noqa: S608
        return [found[0] if found else None for found in self._each(cql, keys)]

    def _each(self, cql: str, keys: Sequence[Key]) -> list[list[dict[str, Any]]]:
        from cassandra.concurrent import execute_concurrent_with_args

        if cql not in self._prepared:
            self._prepared[cql] = self.session().prepare(cql)
        done = execute_concurrent_with_args(self.session(), self._prepared[cql], keys, concurrency=32)
        return [list(result) for _, result in done]

    def _name(self) -> str:
        from cassandra.metadata import protect_name

        return f"{protect_name(self.keyspace)}.{protect_name(self.table)}"

    def _columns(self) -> str:
        from cassandra.metadata import protect_name

        return ", ".join(protect_name(c) for c in self.key_columns()[0])

    def _where(self) -> str:
        return " AND ".join(f"{c} = ?" for c in self._columns().split(", "))

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = self._session = None


def auth_provider(access: ScyllaAccess) -> Any:
    """cassandra-driver's PasswordAuthenticator login, the password read at every new
    connection: a rotated ``password_file`` (a mounted Secret) is picked up."""
    from cassandra.auth import AuthProvider, PlainTextAuthenticator

    class _FromSettings(AuthProvider):  # type: ignore[misc]  # the driver is untyped
        def new_authenticator(self, host: str) -> PlainTextAuthenticator:
            return PlainTextAuthenticator(*(access.credentials() or ("", "")))

    return _FromSettings()


def refusal(error: BaseException, access: ScyllaAccess, contact_points: list[str], port: int,
            timeout_s: float) -> SettingRefused | None:  # fmt: skip
    """The setting to blame when the nodes refused the console (its login, TLS settings or CA);
    None when nothing says a setting is wrong (the nodes are away)."""
    from cassandra import AuthenticationFailed
    from cassandra.cluster import NoHostAvailable

    causes = list(error.errors.values()) if isinstance(error, NoHostAvailable) and error.errors else [error]
    where = f"Scylla/Cassandra at {', '.join(contact_points)}:{port}"
    for cause in causes:
        if isinstance(cause, AuthenticationFailed):
            return access.login_refused(GROUP, where, str(cause))
        if "CERTIFICATE_VERIFY_FAILED" in str(cause):
            return access.handshake_refused(GROUP, where, str(cause))
    if not access.uses_tls and any(speaks_tls(host, port, timeout_s) for host in contact_points):
        return access.tls_required(GROUP, where)
    return None
