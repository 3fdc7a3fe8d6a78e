"""What `make run`'s live view counts in each store the persisters write (0 until the first write)."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

from fluxgate_stack import Endpoints


class Stores:
    """One connection per store, opened on first use and kept for the run. The targets are
    the persisters' defaults unless named (a soak run's own)."""

    def __init__(
        self,
        endpoints: Endpoints,
        es_alias: str = "temperatures",
        table: str = "fluxgate.temperature_aggregates",
        ringbuffer: str = "temperature_aggregates",
        *,
        secured: bool = False,
    ) -> None:
        """``secured``: Elasticsearch and Cassandra are the stack's secured nodes (what
        ``make run SECURED=1`` writes), read as their admin users over TLS."""
        self._endpoints = endpoints
        self._es_alias, self._table, self._ringbuffer = es_alias, table, ringbuffer
        self._secured = secured
        self._scylla: Any = None
        self._hazelcast: Any = None
        self._rows_counted = RingCount(table)
        # A count that fails (the store away, or slow under load) reads as the last one seen:
        # a 0 would look like a stall, and the next good count like progress that is not new.
        self._last = {"elasticsearch": 0, "hazelcast": 0}

    def counts(self) -> dict[str, int]:
        return {"elasticsearch": self._documents(), "scylla": self._rows(), "hazelcast": self._items()}

    def close(self) -> None:
        if self._scylla is not None:
            self._scylla.cluster.shutdown()
        if self._hazelcast is not None:
            self._hazelcast.shutdown()

    def _documents(self) -> int:
        base, headers, context = self._endpoints.elasticsearch_url, {}, None
        if self._secured:
            from fluxgate_stack.secured_elasticsearch import elasticsearch_user

            base, context = (
                self._endpoints.secure_elasticsearch_url,
                ssl.create_default_context(cafile=self._endpoints.ca_path),
            )
            token = base64.b64encode(":".join(elasticsearch_user("admin")).encode()).decode()
            headers = {"Authorization": f"Basic {token}"}
        request = urllib.request.Request(f"{base}/{self._es_alias}/_count", headers=headers)  # noqa: S310 - loopback
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as reply:  # noqa: S310
                self._last["elasticsearch"] = int(json.load(reply)["count"])
        except urllib.error.HTTPError as error:
            if error.code == 404:  # no index behind the alias yet: nothing written
                self._last["elasticsearch"] = 0
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass
        return self._last["elasticsearch"]

    def _rows(self) -> int:
        session = self.scylla_session()
        return self._rows_counted.count(session) if session is not None else self._rows_counted.total

    def _items(self) -> int:
        client = self.hazelcast_client()
        try:
            if client is not None:
                ring = client.get_ringbuffer(self._ringbuffer).blocking()
                self._last["hazelcast"] = int(ring.tail_sequence()) + 1  # every item added, even past the capacity
        except Exception:  # the member is away: the last count stands
            self.drop_hazelcast()
        return self._last["hazelcast"]

    def scylla_session(self) -> Any:
        """The run's session (the Scylla persister's driver), or None while the store is away."""
        from cassandra.cluster import Cluster

        from fluxgate_scylla_persister.driver import CONNECTION_CLASS

        with contextlib.suppress(Exception):
            if self._scylla is None:
                self._scylla = Cluster(
                    [self._endpoints.cassandra_host], connection_class=CONNECTION_CLASS, **self._cassandra_access()
                ).connect()
        return self._scylla

    def _cassandra_access(self) -> dict[str, Any]:
        if not self._secured:
            return {"port": self._endpoints.cassandra_port}
        from cassandra.auth import PlainTextAuthProvider

        from fluxgate_stack.secured_cassandra import cassandra_user

        username, password = cassandra_user("admin")
        return {
            "port": self._endpoints.secure_cassandra_port,
            "auth_provider": PlainTextAuthProvider(username, password),
            "ssl_context": ssl.create_default_context(cafile=self._endpoints.ca_path),
        }

    def drop_hazelcast(self) -> None:
        """Forget a client that failed: one that gave up while the member was away (its
        connect timeout) stays shut down, so the next look connects anew."""
        if self._hazelcast is not None and not self._hazelcast.lifecycle_service.is_running():
            self._hazelcast = None

    def hazelcast_client(self) -> Any:
        """The run's client (the Hazelcast persister's), or None while the member is away."""
        from hazelcast.client import HazelcastClient

        with contextlib.suppress(Exception):
            if self._hazelcast is None:
                self._hazelcast = HazelcastClient(
                    cluster_members=[self._endpoints.hazelcast_address],
                    cluster_name=self._endpoints.hazelcast_cluster,
                    cluster_connect_timeout=5,
                )
        return self._hazelcast


# Murmur3Partitioner's tokens: the lowest is never a partition's, so (MIN, MAX] is the whole ring.
MIN_TOKEN, MAX_TOKEN = -(2**63), 2**63 - 1


class RingCount:
    """A Cassandra table's rows, counted one slice of the token ring at a time.

    ``SELECT count(*)`` of the whole table reads every partition in one request: with a
    fleet's hundred thousand partitions on a loaded machine it outlasts the server's range
    timeout (10 s) and fails as a whole, every time, so a live count read 0 for the rest of
    a run. Here each call counts as many slices as fit in ``budget_s`` (at least one) and
    keeps the last count of the others. A small table is counted whole on every call; a
    big one lags by at most one turn of the ring. Rows are only ever added or overwritten,
    so the total never goes down, and a slice whose count fails keeps its last one."""

    def __init__(self, table: str, slices: int = 32, budget_s: float = 1.0) -> None:
        self._table, self._budget_s = table, budget_s
        step = (MAX_TOKEN - MIN_TOKEN) // slices
        edges = [MIN_TOKEN + i * step for i in range(slices)] + [MAX_TOKEN]
        self._slices = list(itertools.pairwise(edges))
        self._counts = [0] * slices
        self._next = 0
        self._partition_key = ""

    @property
    def total(self) -> int:
        return sum(self._counts)

    def count(self, session: Any) -> int:
        """The table's rows as last counted, after counting the slices that fit in the budget."""
        if not self._partition_key:
            self._partition_key = partition_key(session, self._table)
        started = time.monotonic()
        for _ in self._slices if self._partition_key else ():
            self._count_slice(session, self._next)
            self._next = (self._next + 1) % len(self._slices)
            if time.monotonic() - started > self._budget_s:
                break
        return self.total

    def _count_slice(self, session: Any, index: int) -> None:
        low, high = self._slices[index]
        token = f"token({self._partition_key})"
        cql = f"SELECT count(*) FROM {self._table} WHERE {token} > %s AND {token} <= %s"  # noqa: S608
        with contextlib.suppress(Exception):  # the store is away or slow: the slice keeps its count
            self._counts[index] = int(session.execute(cql, (low, high), timeout=30).one()[0])


def partition_key(session: Any, table: str) -> str:
    """``table``'s partition key columns, in order and comma-separated; "" while it does not exist."""
    from cassandra.metadata import protect_name

    keyspace, name = table.split(".", 1)
    query = "SELECT column_name, kind, position FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s"
    with contextlib.suppress(Exception):  # the store is away: asked again on the next count
        rows = session.execute(query, (keyspace, name))
        columns = sorted((row.position, row.column_name) for row in rows if row.kind == "partition_key")
        return ", ".join(protect_name(column) for _, column in columns)
    return ""
