"""The shared sink suite (fluxgate_sink.testing.suite) against the real Cassandra."""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import Session

import fluxgate_stack
from conftest import KEYSPACE, as_utc, wait_until_answering
from fluxgate_sink.testing.store import StoreUnderTest
from fluxgate_sink.testing.suite import SinkSuite

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


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
            documents[f"{fields['device_id']}|{fields['metric']}|{millis}"] = fields
        return documents

    def count(self, target: str) -> int:
        if not self._exists(target):
            return 0
        return int(self.session.execute(f"SELECT COUNT(*) FROM {target}", timeout=30).one()[0])

    def refused_value(self, value: dict[str, Any]) -> dict[str, Any]:
        # Valid Avro, but a partition key value longer than the 65535 bytes a key component takes.
        return {**value, "device_id": "x" * 70_000}

    def kill(self) -> None:
        fluxgate_stack.kill("cassandra")

    def start(self) -> None:
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


class TestScyllaSinkSuite(SinkSuite):
    @pytest.fixture
    def store(self, cassandra_address: tuple[str, int], cql: Session) -> StoreUnderTest:
        return CassandraUnderTest(cassandra_address, cql)
