"""The shared sink suite (fluxgate_testing.sink.suite) against the real Cassandra."""

from __future__ import annotations

import pytest
from cassandra.cluster import Session
from fluxgate_testing.sink.store import StoreUnderTest
from fluxgate_testing.sink.suite import SinkSuite
from scylla_store import CassandraUnderTest


class TestScyllaSinkSuite(SinkSuite):
    server = "cassandra"

    @pytest.fixture
    def store(self, cassandra_address: tuple[str, int], cql: Session) -> StoreUnderTest:
        return CassandraUnderTest(cassandra_address, cql)
