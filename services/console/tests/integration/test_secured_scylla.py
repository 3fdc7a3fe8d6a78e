"""The Stores card against the secured Cassandra node (``cassandra-secured``): the console
reads the scylla-persister's table through TLS from the stack's CA as its own role, which may
only SELECT. The table and its rows are made by the persister's role, as the persister does."""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, Session
from console_process import Console, wait_for
from fluxgate_testing import unique_topic

pytestmark = pytest.mark.integration


@pytest.fixture
def persisted(secured_cassandra: Any, now: datetime) -> Iterator[str]:
    """A table of AUTOCREATE's layout in the keyspace ``fluxgate``, with two rows of today,
    made and written as the persister's role; dropped as the admin."""
    table = f"fluxgate.console_{uuid.uuid4().hex[:10]}"
    sessions: dict[str, tuple[Cluster, Session]] = {}

    def session(role: str) -> Session:
        if role not in sessions:
            tls = ssl.create_default_context(cafile=str(secured_cassandra.ca_file))
            auth = PlainTextAuthProvider(*secured_cassandra.user(role))
            cluster = Cluster(
                [secured_cassandra.host], port=secured_cassandra.port, auth_provider=auth, ssl_context=tls
            )
            sessions[role] = (cluster, cluster.connect())
        return sessions[role][1]

    persister = session("scylla-persister")
    persister.execute(
        f"CREATE TABLE {table} (device_id text, metric text, day date, window_start timestamp, mean double,"
        " PRIMARY KEY ((device_id, metric, day), window_start)) WITH CLUSTERING ORDER BY (window_start DESC)"
    )
    insert = persister.prepare(
        f"INSERT INTO {table} (device_id, metric, day, window_start, mean) VALUES (?, ?, ?, ?, ?)"
    )
    for device, start, mean in (("dev-a", now - timedelta(seconds=5), 20.5), ("dev-b", now, 22.0)):
        persister.execute(insert, (device, "temperature", start.date(), start, mean))
    yield table
    session("admin").execute(f"DROP TABLE IF EXISTS {table}")
    for cluster, _ in sessions.values():
        cluster.shutdown()


def test_the_console_reads_the_secured_node_as_its_own_role(
    stack: Any, console: Callable[..., Console], secured_cassandra: Any, persisted: str
) -> None:
    env = {name.removeprefix("X_"): value for name, value in secured_cassandra.env("X_", "console").items()}
    audit = unique_topic("console.replays", stack.bootstrap, partitions=1)

    seen = console([], [], audit, **env, SCYLLA__TABLE=persisted, SCYLLA__DAYS="1")

    stores = wait_for(lambda: (s := {x["name"]: x for x in seen.get("/api/state")["stores"]}) and
                      s["scylla"].get("holds") and s, 30, "the secured node answered")  # fmt: skip
    scylla = stores["scylla"]
    assert scylla["error"] is None
    assert [(h["count"], h["detail"]) for h in scylla["holds"]] == [(2, "2 of 2 partitions")]
    assert (scylla["newest"]["device_id"], scylla["newest"]["mean"]) == ("dev-b", 22.0)
    assert env["SCYLLA__PASSWORD"] not in json.dumps(stores)
