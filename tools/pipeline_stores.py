"""What `make run`'s live view counts in each store the persisters write (0 until the first write)."""

from __future__ import annotations

import contextlib
import json
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
    ) -> None:
        self._endpoints = endpoints
        self._es_alias, self._table, self._ringbuffer = es_alias, table, ringbuffer
        self._scylla: Any = None
        self._hazelcast: Any = None

    def counts(self) -> dict[str, int]:
        return {"elasticsearch": self._documents(), "scylla": self._rows(), "hazelcast": self._items()}

    def close(self) -> None:
        if self._scylla is not None:
            self._scylla.cluster.shutdown()
        if self._hazelcast is not None:
            self._hazelcast.shutdown()

    def _documents(self) -> int:
        url = f"{self._endpoints.elasticsearch_url}/{self._es_alias}/_count"
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:  # noqa: S310 - the stack's own loopback URL
                return int(json.load(reply)["count"])
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            return 0

    def _rows(self) -> int:
        session = self.scylla_session()
        with contextlib.suppress(Exception):  # no table yet, or the store is away: nothing counted
            if session is not None:
                return int(session.execute(f"SELECT count(*) FROM {self._table}").one()[0])  # noqa: S608
        return 0

    def _items(self) -> int:
        client = self.hazelcast_client()
        try:
            if client is not None:
                ring = client.get_ringbuffer(self._ringbuffer).blocking()
                return int(ring.tail_sequence()) + 1  # every item added, even past the capacity
        except Exception:  # no ringbuffer yet, or the member is away: nothing counted
            self.drop_hazelcast()
        return 0

    def scylla_session(self) -> Any:
        """The run's session (the Scylla persister's driver), or None while the store is away."""
        from cassandra.cluster import Cluster

        from fluxgate_scylla_persister.driver import CONNECTION_CLASS

        with contextlib.suppress(Exception):
            if self._scylla is None:
                cluster = Cluster(
                    [self._endpoints.cassandra_host],
                    port=self._endpoints.cassandra_port,
                    connection_class=CONNECTION_CLASS,
                )
                self._scylla = cluster.connect()
        return self._scylla

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
