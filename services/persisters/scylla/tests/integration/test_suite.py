"""The shared sink suite (fluxgate_sink.testing.suite) against the real Cassandra."""

from __future__ import annotations

import pytest
from cassandra.cluster import Session

from fluxgate_scylla_persister.testing import CassandraUnderTest
from fluxgate_sink.testing.store import StoreUnderTest
from fluxgate_sink.testing.suite import SinkSuite


class TestScyllaSinkSuite(SinkSuite):
    @pytest.fixture
    def store(self, cassandra_address: tuple[str, int], cql: Session) -> StoreUnderTest:
        return CassandraUnderTest(cassandra_address, cql)
