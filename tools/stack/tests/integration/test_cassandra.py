"""The real Cassandra node: ready, answers a driver, and survives a SIGKILL with its rows.

Uses the root conftest's session fixture ``cassandra`` (starts it if needed, ~5-7 s, and
leaves it running for the next suite). cassandra-driver is the Scylla persister's driver,
installed in the workspace's virtual environment with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from cassandra.cluster import Cluster, Session

from fluxgate_stack import Stack, kill, probes, start

pytestmark = pytest.mark.integration


@pytest.fixture
def session(cassandra: tuple[str, int]) -> Iterator[Session]:
    host, port = cassandra
    cluster = Cluster([host], port=port, connect_timeout=10)
    yield cluster.connect()
    cluster.shutdown()


def test_up_and_ready(cassandra: tuple[str, int], session: Session) -> None:
    host, port = cassandra
    assert (host, port) == (Stack().endpoints().cassandra_host, Stack().endpoints().cassandra_port)
    version = probes.cql_release_version(host, port)
    assert version is not None and version.startswith("5.0.")
    [status] = [s for s in Stack().status() if s.name == "cassandra"]
    assert status.state in ("ready", "external")
    local = session.execute("SELECT cluster_name, release_version, partitioner FROM system.local").one()
    assert local.release_version == version
    assert local.partitioner == "org.apache.cassandra.dht.Murmur3Partitioner"


@pytest.mark.serial(kills="cassandra")
def test_kill_then_start_keeps_the_rows(cassandra: tuple[str, int], session: Session) -> None:
    keyspace = f"stack_test_{uuid.uuid4().hex[:10]}"
    session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    session.execute(f"CREATE TABLE {keyspace}.readings (device text PRIMARY KEY, value double)")
    session.execute(f"INSERT INTO {keyspace}.readings (device, value) VALUES ('d1', 21.5)")
    kill("cassandra")  # the write is in the commit log (page cache), not yet in an sstable
    assert not probes.cql_ready(*cassandra)
    start("cassandra")
    host, port = cassandra
    cluster = Cluster([host], port=port, connect_timeout=10)
    try:
        fresh = cluster.connect()
        row = fresh.execute(f"SELECT value FROM {keyspace}.readings WHERE device = 'd1'").one()
        assert row is not None and row.value == 21.5
        fresh.execute(f"DROP KEYSPACE {keyspace}")
    finally:
        cluster.shutdown()
