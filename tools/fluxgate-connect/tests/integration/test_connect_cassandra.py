"""A Cassandra sink config, run by ``fluxgate connect``: Avro aggregates on its topic end up as
rows of the KCQL's table (AUTOCREATE) in the config's key space, read back with CQL."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cassandra.cluster import Cluster
from connect_runs import aggregates, connect, produce_aggregates

pytestmark = pytest.mark.integration


def test_the_cassandra_sink_config_moves_aggregates_into_its_table(
    stack: Any, registry_client: Any, cassandra: tuple[str, int]
) -> None:
    values = aggregates(20)
    topic = produce_aggregates(stack, registry_client, "connect.temperatures.aggregated", values)
    table = f"t_{uuid.uuid4().hex[:10]}"
    host, port = cassandra
    cluster = Cluster([host], port=port)
    session = cluster.connect()

    def rows() -> list[Any]:
        exists = session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'fluxgate_connect' AND table_name = %s",
            (table,),
        ).one()
        return list(session.execute(f"SELECT device_id, max FROM fluxgate_connect.{table}")) if exists else []

    placeholders = {"AGGREGATES_TOPIC": topic, "CASSANDRA_TABLE": table,
                    "CASSANDRA_HOST": host, "CASSANDRA_PORT": str(port)}  # fmt: skip
    try:
        with connect("cassandra-sink-local.properties", "FLUXGATE_SCYLLA_", stack, placeholders) as persister:
            persister.start()
            persister.wait_until(lambda: len(rows()) >= len(values), f"{len(values)} rows in {table}", 90)
            assert persister.terminate() == 0, persister.log_tail()
        assert sorted(row.max for row in rows()) == sorted(value["max"] for value in values)
        assert "running scylla-persister" in persister.log_text()
    finally:
        session.execute(f"DROP TABLE IF EXISTS fluxgate_connect.{table}")
        cluster.shutdown()
