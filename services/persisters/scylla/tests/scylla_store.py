"""Test helpers shared by the persister's integration tests, bench and the sink suite adapter:
a plain CQL session, decoded aggregates as the runner routes them, and the store as the
shared sink suite (``fluxgate_testing.sink.suite``) sees it. Not used by the service itself."""

from __future__ import annotations

import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cassandra.cluster import Cluster, Session
from fluxgate_testing.aggregates import temperature_aggregate
from fluxgate_testing.sink.items import sink_item
from fluxgate_testing.sink.store import StoreUnderTest

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_scylla_persister.driver import CONNECTION_CLASS
from fluxgate_sink.kcql import Statement, parse, safe_id
from fluxgate_sink.sink import SinkItem

KEYSPACE = "fluxgate_test"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def host_and_port(endpoint: Any) -> tuple[str, int]:
    """``127.0.0.1:9042``, ``(host, port)``, an object with ``host``/``port``, or a bare host."""
    if isinstance(endpoint, tuple):
        return str(endpoint[0]), int(endpoint[1])
    if not isinstance(endpoint, str):
        endpoint = f"{endpoint.host}:{endpoint.port}"
    host, _, port = endpoint.rpartition(":")
    return (host, int(port)) if host else (endpoint, 9042)


def connect(address: tuple[str, int]) -> tuple[Cluster, Session]:
    """A plain session (libev, like the persister) with a 30 s default timeout."""
    cluster = Cluster([address[0]], port=address[1], connection_class=CONNECTION_CLASS)
    session = cluster.connect()
    session.default_timeout = 30
    return cluster, session


def create_keyspace(session: Session, keyspace: str = KEYSPACE) -> None:
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace}"
        " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )


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


def statement(kcql: str) -> Statement:
    (parsed,) = parse(kcql)
    return parsed


def aggregate(device: str, window_start: datetime, **changes: Any) -> dict[str, Any]:
    """A decoded TemperatureAggregate, its readings spread over the window."""
    spread = {
        "stddev": 0.8165,
        "first_event_time": window_start + timedelta(seconds=1),
        "last_event_time": window_start + timedelta(seconds=59),
    }
    return temperature_aggregate(device, window_start, **{**spread, **changes})


def as_item(stmt: Statement, record: dict[str, Any], offset: int = 0) -> SinkItem:
    """What the runner's router makes of a decoded record."""
    return sink_item(stmt, record, offset, key=b"key")


def any_item(stmt: Statement, record: dict[str, Any], offset: int = 0, timestamp_ms: int = 0) -> SinkItem:
    """What the router makes of any record, as a connector config's topic holds them: no PK and no
    event-time field needed (the document id is topic-partition-offset, the time the Kafka one)."""
    source = ConsumedRecord("readings", 0, offset, b"key", b"", (), timestamp_ms, record)
    event_time = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    return SinkItem(source, stmt, stmt.target, f"readings-0-{offset}", stmt.project(record), event_time)


def items(stmt: Statement, records: list[dict[str, Any]]) -> list[SinkItem]:
    return [as_item(stmt, record, offset) for offset, record in enumerate(records)]


def as_utc(value: Any) -> Any:
    """The driver reads timestamps back as naive UTC datetimes."""
    return value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value


class CassandraUnderTest(StoreUnderTest):
    """One AUTOCREATEd table per target (the default layout), read back with plain CQL."""

    argv = (str(Path(sys.executable).with_name("fluxgate-scylla-persister")),)
    env_prefix = "FLUXGATE_SCYLLA_"

    def __init__(self, address: tuple[str, int], session: Session) -> None:
        self.address = address
        self.session = session

    def env(self) -> dict[str, str]:
        return {
            "SCYLLA__CONTACT_POINTS": f'["{self.address[0]}"]',
            "SCYLLA__PORT": str(self.address[1]),
            "SCYLLA__RECONNECT_MAX_DELAY_S": "1",
            "SCYLLA__REQUEST_TIMEOUT_S": "5",
        }

    def new_target(self) -> str:
        return f"{KEYSPACE}.suite_{uuid.uuid4().hex[:10]}"

    def kcql(self, topic: str, target: str) -> str:
        return f"UPSERT INTO {target} SELECT * FROM {topic} AUTOCREATE"

    def documents(self, target: str) -> dict[str, dict[str, Any]]:
        if not self._exists(target):
            return {}
        rows = self.session.execute(f"SELECT * FROM {target}", timeout=30)
        documents = {}
        for row in rows:
            fields = {k: as_utc(v) for k, v in row._asdict().items()}
            millis = (fields["window_start"] - EPOCH) // _MS
            documents[safe_id(f"{fields['device_id']}|{fields['metric']}|{millis}")] = fields
        return documents

    def count(self, target: str) -> int:
        if not self._exists(target):
            return 0
        counted = self.session.execute(f"SELECT COUNT(*) FROM {target}", timeout=30)
        return int(counted.one()[0])

    def refused_value(self, value: dict[str, Any]) -> dict[str, Any]:
        # Valid Avro, but a partition key value longer than the 65535 bytes a key component takes.
        return {**value, "device_id": "x" * 70_000}

    def kill(self) -> None:
        import fluxgate_stack

        fluxgate_stack.kill("cassandra")

    def start(self) -> None:
        import fluxgate_stack

        fluxgate_stack.start("cassandra")
        wait_until_answering(self.session)

    def drop(self, target: str) -> None:
        self.session.execute(f"DROP TABLE IF EXISTS {target}", timeout=60)

    def _exists(self, target: str) -> bool:
        keyspace, table = target.split(".")
        found = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )
        return found.one() is not None
