"""The secured Cassandra node's configuration and its users' passwords, without a node."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from fluxgate_stack.errors import StackError
from fluxgate_stack.secured_cassandra import cassandra_env, cassandra_user, users_file
from fluxgate_stack.servers import build, default_names
from fluxgate_stack.servers.cassandra import CLUSTER_NAME, node_config
from fluxgate_stack.servers.cassandra_secured import SecuredCassandraServer, secured_node_config
from fluxgate_stack.settings import StackSettings


@pytest.fixture(autouse=True)
def _stack_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("FLUXGATE_STACK_")]:
        monkeypatch.delenv(name)


def test_the_secured_node_holds_every_client_to_tls_and_a_password(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    config = secured_node_config(settings, tmp_path / "data", tmp_path / "server.pem")
    assert config["authenticator"] == "PasswordAuthenticator"
    assert config["authorizer"] == "CassandraAuthorizer"
    assert config["role_manager"] == "CassandraRoleManager"
    assert config["client_encryption_options"] == {
        "enabled": True,
        "optional": False,
        "ssl_context_factory": {"class_name": "org.apache.cassandra.security.PEMBasedSslContextFactory"},
        "keystore": str(tmp_path / "server.pem"),
        "require_client_auth": False,
    }


def test_the_secured_node_runs_beside_the_open_one(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    config = secured_node_config(settings, tmp_path / "secured", tmp_path / "server.pem")
    open_node = node_config(settings, tmp_path / "open")
    assert (config["native_transport_port"], config["storage_port"]) == (9043, 7001)
    assert config["seed_provider"] == [
        {"class_name": "org.apache.cassandra.locator.SimpleSeedProvider", "parameters": [{"seeds": "127.0.0.1:7001"}]}
    ]
    assert config["cluster_name"] != CLUSTER_NAME  # a node that reached the other would be refused
    assert open_node["authenticator"] == "AllowAllAuthenticator"  # the lab's node is unchanged
    server, plain = build(["cassandra-secured", "cassandra"], settings)[::-1]
    assert server.run_dir != plain.run_dir and server.data_dir != plain.data_dir
    assert [p.number for p in server.ports()] == [9043, 7001]


def test_it_starts_only_when_asked_with_a_smaller_heap(tmp_path: Path) -> None:
    assert "cassandra-secured" not in default_names()
    server = SecuredCassandraServer(StackSettings(home=tmp_path))
    assert server.heap_options() == ["-Xms512m", "-Xmx768m"]


def test_passwords_are_random_made_once_and_private(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    username, password = cassandra_user("scylla-persister", settings)
    assert username == "scylla_persister" and len(password) >= 24
    assert cassandra_user("scylla-persister", settings) == (username, password)  # kept, not made again
    assert cassandra_user("console", settings)[1] not in (password, cassandra_user("admin", settings)[1])
    assert stat.S_IMODE(users_file(settings).stat().st_mode) == 0o600
    assert set(json.loads(users_file(settings).read_text())) == {"admin", "scylla-persister", "console"}
    with pytest.raises(StackError, match="unknown Cassandra role 'es-persister'"):
        cassandra_user("es-persister", settings)


def test_a_service_environment_for_the_secured_node(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    env = cassandra_env("FLUXGATE_CONSOLE_", "console", settings)
    assert env == {
        "FLUXGATE_CONSOLE_SCYLLA__CONTACT_POINTS": '["127.0.0.1"]',
        "FLUXGATE_CONSOLE_SCYLLA__PORT": "9043",
        "FLUXGATE_CONSOLE_SCYLLA__USERNAME": "console",
        "FLUXGATE_CONSOLE_SCYLLA__PASSWORD": cassandra_user("console", settings)[1],
        "FLUXGATE_CONSOLE_SCYLLA__TLS_CA_FILE": str(tmp_path / ".local" / "pki" / "ca.crt"),
    }


def test_a_service_environment_with_the_password_in_a_file(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    secret = tmp_path / "scylla-persister.password"
    env = cassandra_env("FLUXGATE_SCYLLA_", "scylla-persister", settings, password_file=secret)
    assert "FLUXGATE_SCYLLA_SCYLLA__PASSWORD" not in env
    assert env["FLUXGATE_SCYLLA_SCYLLA__PASSWORD_FILE"] == str(secret)
    assert secret.read_text() == cassandra_user("scylla-persister", settings)[1] + "\n"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
