from __future__ import annotations

import pytest
from fluxgate_testing.env import clean_env_fixture

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings
from fluxgate_scylla_persister.settings import DEFAULT_KCQL, ScyllaSettings

clean_env = clean_env_fixture("FLUXGATE_SCYLLA_")


def test_defaults_work_with_the_local_stack() -> None:
    settings = load_settings(ScyllaSettings)
    assert settings.http.port == 9105
    assert settings.scylla.contact_points == ["127.0.0.1"] and settings.scylla.port == 9042
    assert settings.scylla.consistency == "LOCAL_QUORUM"
    assert settings.sink.kcql == DEFAULT_KCQL
    assert not settings.scylla.uses_tls and settings.scylla.username is None


def test_nested_groups_and_secrets(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS", '["10.0.0.1", "10.0.0.2"]')
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__USERNAME", "writer")
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__PASSWORD", "s3cret")
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__TLS_CA_FILE", "/etc/ssl/scylla-ca.pem")
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY", "QUORUM")
    clean_env.setenv("FLUXGATE_SCYLLA_HTTP__HOST", "127.0.0.1")
    settings = load_settings(ScyllaSettings)
    assert settings.http.port == 9105  # setting only the host keeps the service's port
    assert settings.scylla.contact_points == ["10.0.0.1", "10.0.0.2"]
    assert settings.scylla.uses_tls and settings.scylla.consistency == "QUORUM"
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY", "MOST"),
        ("FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS", "[]"),
        ("FLUXGATE_SCYLLA_SCYLLA__MAX_IN_FLIGHT", "0"),
        ("FLUXGATE_SCYLLA_SCYLLA__REQUEST_TIMEOUT_S", "-1"),
        ("FLUXGATE_SCYLLA_SCYLLA__REPLICATION_STRATEGY", "LocalStrategy"),
        ("FLUXGATE_SCYLLA_SCYLLA__KEYSPACE", "no-dashes"),
        ("FLUXGATE_SCYLLA_SINK__KCQL", "UPSERT INTO t SELECT FROM x"),
        ("FLUXGATE_SCYLLA_SCYLLA__COLOUR", "red"),
    ],
)
def test_a_bad_value_names_its_variable(clean_env: pytest.MonkeyPatch, variable: str, value: str) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        load_settings(ScyllaSettings)


def test_username_without_password(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__USERNAME", "writer")
    with pytest.raises(ConfigError, match=r"FLUXGATE_SCYLLA_SCYLLA.*username and password"):
        load_settings(ScyllaSettings)


@pytest.mark.parametrize(
    ("username", "password"), [("", ""), ("writer", ""), ("", "s3cret")], ids=["both", "password", "username"]
)
def test_an_empty_username_or_password_means_no_authentication(
    clean_env: pytest.MonkeyPatch, username: str, password: str
) -> None:
    # As Stream-Reactor's Cassandra sink (CassandraConnection.scala: credentials only when both are non-empty).
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__USERNAME", username)
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__PASSWORD", password)
    settings = load_settings(ScyllaSettings)
    assert settings.scylla.credentials() is None
    assert settings.scylla.username is None and settings.scylla.password is None


def test_a_username_without_any_password_is_still_refused(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__USERNAME", "writer")
    with pytest.raises(ConfigError, match="username and password"):
        load_settings(ScyllaSettings)


def test_the_column_match_is_fluxgate_unless_set(clean_env: pytest.MonkeyPatch) -> None:
    assert load_settings(ScyllaSettings).scylla.column_match == "fluxgate"
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__COLUMN_MATCH", "stream-reactor")
    assert load_settings(ScyllaSettings).scylla.column_match == "stream-reactor"
    clean_env.setenv("FLUXGATE_SCYLLA_SCYLLA__COLUMN_MATCH", "exact")
    with pytest.raises(ConfigError, match="column_match"):
        load_settings(ScyllaSettings)
