"""The real secured Cassandra node (server ``cassandra-secured``): TLS only, no login without
the right password, the default superuser gone, and each service's role allowed what its
service does and no more. Tables are the test's own, in the keyspace the roles are granted.

Uses the root conftest's session fixture ``secured_cassandra`` (starts the node if needed,
~10 s, and leaves it running).
"""

from __future__ import annotations

import ssl
import stat
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra import AuthenticationFailed, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable, Session
from cassandra.io.libevreactor import LibevConnection

from fluxgate_stack import Stack, probes
from fluxgate_stack.secured_cassandra import KEYSPACE, provision, users_file

pytestmark = pytest.mark.integration


def connect(node: Any, credentials: tuple[str, str] | None, tls: ssl.SSLContext | None) -> tuple[Cluster, Session]:
    auth = PlainTextAuthProvider(*credentials) if credentials else None
    cluster = Cluster(
        [node.host],
        port=node.port,
        auth_provider=auth,
        ssl_context=tls,
        connection_class=LibevConnection,
        connect_timeout=10,
        control_connection_timeout=10,
    )
    try:
        return cluster, cluster.connect()
    except BaseException:
        cluster.shutdown()
        raise


def refusal(node: Any, credentials: tuple[str, str] | None, tls: ssl.SSLContext | None) -> BaseException:
    """The one host's error when connecting is refused."""
    with pytest.raises(NoHostAvailable) as refused:
        connect(node, credentials, tls)[0].shutdown()
    [error] = refused.value.errors.values()
    return error


@pytest.fixture(scope="module")
def tls(secured_cassandra: Any) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(secured_cassandra.ca_file))


@pytest.fixture
def as_role(secured_cassandra: Any, tls: ssl.SSLContext) -> Iterator[Any]:
    clusters: list[Cluster] = []

    def login(role: str) -> Session:
        cluster, session = connect(secured_cassandra, secured_cassandra.user(role), tls)
        clusters.append(cluster)
        return session

    yield login
    for cluster in clusters:
        cluster.shutdown()


@pytest.fixture
def table(as_role: Any) -> Iterator[str]:
    """A table of the test's own, created by the persister's role (as AUTOCREATE does)."""
    name = f"{KEYSPACE}.secured_test_{uuid.uuid4().hex[:10]}"
    persister = as_role("scylla-persister")
    persister.execute(f"CREATE TABLE IF NOT EXISTS {name} (device text PRIMARY KEY, value double)")
    yield name
    as_role("admin").execute(f"DROP TABLE IF EXISTS {name}")


def test_ready_behind_tls_and_a_password(secured_cassandra: Any) -> None:
    [status] = [s for s in Stack().status() if s.name == "cassandra-secured"]
    assert status.state == "ready"
    assert (secured_cassandra.host, secured_cassandra.port) == ("127.0.0.1", 9043)
    # The plaintext probe the open node answers gets nothing here.
    assert probes.cql_release_version(secured_cassandra.host, secured_cassandra.port) is None


def test_a_plaintext_client_is_refused(secured_cassandra: Any) -> None:
    error = refusal(secured_cassandra, secured_cassandra.user("console"), None)
    assert isinstance(error, OSError | ConnectionError), error


def test_a_node_certificate_from_another_ca_is_refused_by_the_client(secured_cassandra: Any) -> None:
    error = refusal(secured_cassandra, secured_cassandra.user("console"), ssl.create_default_context())
    assert "CERTIFICATE_VERIFY_FAILED" in str(error)


def test_no_password_or_a_wrong_one_is_refused(secured_cassandra: Any, tls: ssl.SSLContext) -> None:
    assert "requires authentication" in str(refusal(secured_cassandra, None, tls))
    username, password = secured_cassandra.user("scylla-persister")
    error = refusal(secured_cassandra, (username, password[::-1]), tls)
    assert isinstance(error, AuthenticationFailed) and "Bad credentials" in str(error)


def test_the_default_superuser_is_gone(secured_cassandra: Any, tls: ssl.SSLContext) -> None:
    error = refusal(secured_cassandra, ("cassandra", "cassandra"), tls)
    assert isinstance(error, AuthenticationFailed), error


def test_the_passwords_are_kept_private(secured_cassandra: Any) -> None:
    assert stat.S_IMODE(users_file(secured_cassandra.settings).stat().st_mode) == 0o600


def test_the_persister_creates_writes_and_reads_its_tables(as_role: Any, table: str) -> None:
    persister = as_role("scylla-persister")
    persister.execute(f"INSERT INTO {table} (device, value) VALUES ('d1', 21.5)")
    assert persister.execute(f"SELECT value FROM {table} WHERE device = 'd1'").one().value == 21.5


def test_the_persister_cannot_leave_its_keyspace(as_role: Any) -> None:
    persister = as_role("scylla-persister")
    other = f"secured_test_{uuid.uuid4().hex[:10]}"
    with pytest.raises(Unauthorized):
        persister.execute(
            f"CREATE KEYSPACE {other} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        )
    with pytest.raises(Unauthorized):
        persister.execute("SELECT * FROM system_auth.roles")
    with pytest.raises(Unauthorized):
        persister.execute("CREATE ROLE intruder WITH PASSWORD = 'x' AND LOGIN = true")
    with pytest.raises(Unauthorized):
        persister.execute(f"DROP KEYSPACE {KEYSPACE}")


def test_the_console_reads_and_cannot_write(as_role: Any, table: str) -> None:
    as_role("scylla-persister").execute(f"INSERT INTO {table} (device, value) VALUES ('d2', 19.0)")
    console = as_role("console")
    assert console.execute(f"SELECT value FROM {table} WHERE device = 'd2'").one().value == 19.0
    with pytest.raises(Unauthorized):
        console.execute(f"INSERT INTO {table} (device, value) VALUES ('d3', 1.0)")
    with pytest.raises(Unauthorized):
        console.execute(f"TRUNCATE {table}")
    with pytest.raises(Unauthorized):
        console.execute(f"CREATE TABLE {KEYSPACE}.console_{uuid.uuid4().hex[:8]} (k text PRIMARY KEY)")


def test_provisioning_again_changes_nothing(secured_cassandra: Any, as_role: Any, table: str) -> None:
    before = {role: secured_cassandra.user(role) for role in ("admin", "scylla-persister", "console")}
    provision(secured_cassandra.settings)
    assert {role: secured_cassandra.user(role) for role in before} == before
    as_role("scylla-persister").execute(f"INSERT INTO {table} (device, value) VALUES ('d4', 2.0)")
    assert as_role("console").execute(f"SELECT value FROM {table} WHERE device = 'd4'").one().value == 2.0
