"""The persister against the secured Cassandra node (``cassandra-secured``): TLS from the
stack's CA, its own role (CREATE, MODIFY, SELECT on the keyspace ``fluxgate`` only), the
password given inline or from a file (a mounted Secret). It autocreates its table and
writes every aggregate, as against the open node.

Kafka is the stack's lab listener: the Kafka hop's security is proved elsewhere
(tests/e2e/test_wrong_credentials.py)."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, Session
from fluxgate_testing.sink.suite import Run, aggregate
from scylla_store import CassandraUnderTest

from fluxgate_scylla_persister.driver import CONNECTION_CLASS

pytestmark = pytest.mark.integration
ROLE = "scylla-persister"


class SecuredCassandra(CassandraUnderTest):
    """The secured node, tables in the keyspace the persister's role may create tables in;
    read back as the admin."""

    def __init__(self, node: Any, session: Session, env: dict[str, str]) -> None:
        super().__init__((node.host, node.port), session)
        self._env = env

    def env(self) -> dict[str, str]:
        return {**super().env(), **self._env}

    def new_target(self) -> str:
        return f"fluxgate.secured_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def admin(secured_cassandra: Any) -> Iterator[Session]:
    tls = ssl.create_default_context(cafile=str(secured_cassandra.ca_file))
    cluster = Cluster(
        [secured_cassandra.host],
        port=secured_cassandra.port,
        auth_provider=PlainTextAuthProvider(*secured_cassandra.user("admin")),
        ssl_context=tls,
        connection_class=CONNECTION_CLASS,
    )
    session = cluster.connect()
    session.default_timeout = 30
    yield session
    cluster.shutdown()


def role_env(secured_cassandra: Any) -> dict[str, str]:
    """The persister's ``SCYLLA__*`` for its role, without the service prefix."""
    return {name.removeprefix("X_"): value for name, value in secured_cassandra.env("X_", ROLE).items()}


def write_through(run: Run) -> None:
    values = [aggregate(i, 0) for i in range(6)]
    run.produce(values)
    process = run.persister().start()
    run.wait_for(process, len(values))
    assert process.running and process.terminate() == 0
    stored = run.store.documents(run.target)
    assert {doc["device_id"] for doc in stored.values()} == {v["device_id"] for v in values}


def test_the_persister_writes_through_tls_and_its_own_role(
    stack: Any, registry_client: Any, secured_cassandra: Any, admin: Session
) -> None:
    run = Run(stack, SecuredCassandra(secured_cassandra, admin, role_env(secured_cassandra)), registry_client)
    try:
        write_through(run)
    finally:
        admin.execute(f"DROP TABLE IF EXISTS {run.target}")
        run.close()


def test_the_password_from_a_file(
    stack: Any, registry_client: Any, secured_cassandra: Any, admin: Session, tmp_path: Path
) -> None:
    env = role_env(secured_cassandra)
    secret = tmp_path / "password"
    secret.write_text(env.pop("SCYLLA__PASSWORD") + "\n")  # as an editor or `kubectl create secret` leaves it
    secret.chmod(0o600)
    env["SCYLLA__PASSWORD_FILE"] = str(secret)
    run = Run(stack, SecuredCassandra(secured_cassandra, admin, env), registry_client)
    try:
        write_through(run)
    finally:
        admin.execute(f"DROP TABLE IF EXISTS {run.target}")
        run.close()
