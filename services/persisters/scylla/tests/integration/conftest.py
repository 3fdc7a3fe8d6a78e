"""A real Cassandra (the local stack's) for every test here; each test gets its own table."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cassandra.cluster import Cluster, Session

from fluxgate_core.kafka import ConsumedRecord
from fluxgate_scylla_persister.driver import CONNECTION_CLASS
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink
from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.sink import SinkItem

pytestmark = pytest.mark.integration
KEYSPACE = "fluxgate_test"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def host_and_port(endpoint: Any) -> tuple[str, int]:
    """``127.0.0.1:9042``, an object with host/port, or a bare host."""
    if isinstance(endpoint, tuple):
        return str(endpoint[0]), int(endpoint[1])
    if not isinstance(endpoint, str):
        endpoint = getattr(endpoint, "cassandra", None) or f"{endpoint.host}:{endpoint.port}"
    host, _, port = str(endpoint).removeprefix("cql://").rpartition(":")
    return (host, int(port)) if host else (str(endpoint), 9042)


@pytest.fixture(scope="session")
def cassandra_address(request: pytest.FixtureRequest) -> tuple[str, int]:
    """The stack's Cassandra: the root ``cassandra`` fixture, else started (or reused) here."""
    try:
        return host_and_port(request.getfixturevalue("cassandra"))
    except pytest.FixtureLookupError:
        from fluxgate_stack import ensure_up

        return host_and_port(getattr(ensure_up(["cassandra"]), "cassandra_address", None) or "127.0.0.1:9042")


def connect(address: tuple[str, int]) -> tuple[Cluster, Session]:
    cluster = Cluster([address[0]], port=address[1], connection_class=CONNECTION_CLASS)
    session = cluster.connect()
    session.default_timeout = 30
    return cluster, session


def wait_until_answering(session: Session, timeout: float = 120) -> None:
    """After a restart: until this client's pool is back (the driver reconnects on its own)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            session.execute("SELECT release_version FROM system.local", timeout=5)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="session")
def cql(cassandra_address: tuple[str, int]) -> Iterator[Session]:
    """A plain session for assertions, with the tests' keyspace."""
    cluster, session = connect(cassandra_address)
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE}"
        " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    yield session
    cluster.shutdown()


@pytest.fixture
def target(cql: Session) -> Iterator[str]:
    name = f"{KEYSPACE}.t_{uuid.uuid4().hex[:10]}"
    yield name
    cql.execute(f"DROP TABLE IF EXISTS {name}")


def connection(address: tuple[str, int], **changes: Any) -> ConnectionSettings:
    return ConnectionSettings(contact_points=[address[0]], port=address[1], **changes)  # type: ignore[call-arg]


@pytest.fixture
async def sink(cassandra_address: tuple[str, int]) -> AsyncIterator[ScyllaSink]:
    scylla_sink = ScyllaSink(connection(cassandra_address, request_timeout_s=10))
    yield scylla_sink
    await scylla_sink.close()


def statement(kcql: str) -> Statement:
    (parsed,) = parse(kcql)
    return parsed


def aggregate(device: str, window_start: datetime, **changes: Any) -> dict[str, Any]:
    """A decoded TemperatureAggregate (timestamps as aware datetimes, as fastavro gives them)."""
    return {
        "device_id": device,
        "metric": "temperature",
        "window_start": window_start,
        "window_end": window_start + timedelta(minutes=1),
        "count": 3,
        "min": 20.5,
        "max": 22.5,
        "mean": 21.5,
        "stddev": 0.8165,
        "first_event_time": window_start + timedelta(seconds=1),
        "last_event_time": window_start + timedelta(seconds=59),
        "unit": "Cel",
        **changes,
    }


def as_item(stmt: Statement, record: dict[str, Any], offset: int = 0) -> SinkItem:
    """What the runner's router makes of a decoded record."""
    source = ConsumedRecord("temperatures.aggregated", 0, offset, b"key", b"", {}, 0, record)
    event_time = stmt.event_time(record)
    return SinkItem(
        source, stmt, stmt.target_for(event_time), stmt.document_id(record), stmt.project(record), event_time
    )


def items(stmt: Statement, records: list[dict[str, Any]]) -> list[SinkItem]:
    return [as_item(stmt, record, offset) for offset, record in enumerate(records)]


def as_utc(value: Any) -> Any:
    """The driver reads timestamps back as naive UTC datetimes."""
    return value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value


@pytest.fixture
def make_aggregate() -> Callable[..., dict[str, Any]]:
    return aggregate
