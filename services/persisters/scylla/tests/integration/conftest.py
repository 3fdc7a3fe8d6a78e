"""A real Cassandra (the local stack's) for every test here; each test gets its own table."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from cassandra.cluster import Session
from scylla_store import KEYSPACE, connect, create_keyspace, host_and_port

from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def cassandra_address(request: pytest.FixtureRequest) -> tuple[str, int]:
    """``FLUXGATE_TEST_CASSANDRA`` (host:port of a server already running), else the stack's
    Cassandra: the root ``cassandra`` fixture, else started (or reused) here."""
    if configured := os.environ.get("FLUXGATE_TEST_CASSANDRA"):
        return host_and_port(configured)
    try:
        return host_and_port(request.getfixturevalue("cassandra"))
    except pytest.FixtureLookupError:
        from fluxgate_stack import ensure_up

        endpoints = ensure_up(["cassandra"])
        return endpoints.cassandra_host, endpoints.cassandra_port


@pytest.fixture(scope="module")  # closed with its module: see the root conftest
def cql(cassandra_address: tuple[str, int]) -> Iterator[Session]:
    """A plain session for assertions, with the tests' keyspace."""
    cluster, session = connect(cassandra_address)
    create_keyspace(session)
    yield session
    cluster.shutdown()


@pytest.fixture
def target(cql: Session) -> Iterator[str]:
    name = f"{KEYSPACE}.t_{uuid.uuid4().hex[:10]}"
    yield name
    cql.execute(f"DROP TABLE IF EXISTS {name}")


def connection(address: tuple[str, int], **changes: Any) -> ConnectionSettings:
    options: dict[str, Any] = {"contact_points": [address[0]], "port": address[1], **changes}
    return ConnectionSettings(**options)


@pytest.fixture
def settings_for(cassandra_address: tuple[str, int]) -> Any:
    """ConnectionSettings for the test server, with ``changes``."""

    def make(**changes: Any) -> ConnectionSettings:
        return connection(cassandra_address, **changes)

    return make


@pytest.fixture
async def sink(cassandra_address: tuple[str, int]) -> AsyncIterator[ScyllaSink]:
    scylla_sink = ScyllaSink(connection(cassandra_address, request_timeout_s=10))
    yield scylla_sink
    await scylla_sink.close()
