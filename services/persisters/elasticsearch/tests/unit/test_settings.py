from __future__ import annotations

import os

import pytest
from fluxgate_testing.env import clean_env_fixture
from fluxgate_testing.sink.memory import record

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings
from fluxgate_es_persister.settings import DEFAULT_KCQL, ElasticsearchSettings
from fluxgate_sink.ids import fluxgate_id
from fluxgate_sink.kcql import parse

clean_env = clean_env_fixture("FLUXGATE_ES_")


def test_defaults_work_with_the_local_stack() -> None:
    settings = load_settings(ElasticsearchSettings)
    assert settings.http.port == 9104
    assert settings.elasticsearch.hosts == ["http://127.0.0.1:9200"]
    assert settings.sink.kcql == DEFAULT_KCQL
    assert settings.sink.error_policy == "THROW"
    assert (settings.retention.days, settings.retention.action) == (7, "delete")
    options = settings.elasticsearch.client_options()
    assert "api_key" not in options and "basic_auth" not in options


def test_nested_groups_and_secrets(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__HOSTS", '["https://es1:9200", "https://es2:9200"]')
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__USERNAME", "writer")
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__PASSWORD", "s3cret")
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__CA_CERTS", "/etc/ssl/es-ca.pem")
    clean_env.setenv("FLUXGATE_ES_RETENTION__ACTION", "close")
    clean_env.setenv("FLUXGATE_ES_HTTP__HOST", "127.0.0.1")
    settings = load_settings(ElasticsearchSettings)
    assert settings.http.port == 9104  # setting only the host keeps the service's port
    assert settings.retention.action == "close"
    assert "s3cret" not in repr(settings)
    options = settings.elasticsearch.client_options()
    assert options["hosts"] == ["https://es1:9200", "https://es2:9200"]
    assert options["basic_auth"] == ("writer", "s3cret")
    assert options["ca_certs"] == "/etc/ssl/es-ca.pem"


def test_api_key(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__API_KEY", "aWQ6a2V5")
    assert load_settings(ElasticsearchSettings).elasticsearch.client_options()["api_key"] == "aWQ6a2V5"


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("FLUXGATE_ES_RETENTION__ACTION", "archive", "FLUXGATE_ES_RETENTION__ACTION"),
        ("FLUXGATE_ES_RETENTION__DAYS", "0", "FLUXGATE_ES_RETENTION__DAYS"),
        ("FLUXGATE_ES_RETENTION__INTERVAL_S", "soon", "FLUXGATE_ES_RETENTION__INTERVAL_S"),
        ("FLUXGATE_ES_ELASTICSEARCH__REQUEST_TIMEOUT", "-1", "FLUXGATE_ES_ELASTICSEARCH__REQUEST_TIMEOUT"),
        ("FLUXGATE_ES_ELASTICSEARCH__NUMBER_OF_SHARDS", "0", "FLUXGATE_ES_ELASTICSEARCH__NUMBER_OF_SHARDS"),
        ("FLUXGATE_ES_ELASTICSEARCH__HOSTS", "[]", "FLUXGATE_ES_ELASTICSEARCH__HOSTS"),
        ("FLUXGATE_ES_ELASTICSEARCH__HOSTS", "[not json", "FLUXGATE_ES_ELASTICSEARCH"),
        ("FLUXGATE_ES_SINK__ERROR_POLICY", "IGNORE", "FLUXGATE_ES_SINK__ERROR_POLICY"),
        ("FLUXGATE_ES_HTTP__PORT", "99999", "FLUXGATE_ES_HTTP__PORT"),
        ("FLUXGATE_ES_ELASTICSEARCH__COLOUR", "red", "FLUXGATE_ES_ELASTICSEARCH__COLOUR"),
    ],
)
def test_a_bad_value_names_its_variable(clean_env: pytest.MonkeyPatch, variable: str, value: str, named: str) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(ConfigError, match=named):
        load_settings(ElasticsearchSettings)


def test_conflicting_auth_names_both_fields(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__API_KEY", "aWQ6a2V5")
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__USERNAME", "writer")
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__PASSWORD", "s3cret")
    with pytest.raises(ConfigError) as caught:
        load_settings(ElasticsearchSettings)
    message = str(caught.value)
    assert "FLUXGATE_ES_ELASTICSEARCH" in message
    assert "api_key" in message and "username" in message
    assert "s3cret" not in message and "aWQ6a2V5" not in message


def test_username_without_password(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__USERNAME", "writer")
    with pytest.raises(ConfigError, match=r"username and password"):
        load_settings(ElasticsearchSettings)


def test_basic_auth_password_from_a_file(clean_env: pytest.MonkeyPatch, tmp_path: os.PathLike[str]) -> None:
    """A Kubernetes Secret mounted as a file: the password never sits in the environment."""
    secret = os.path.join(tmp_path, "es.password")
    with open(secret, "w") as handle:
        handle.write("from-the-secret\n")
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__USERNAME", "writer")
    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__PASSWORD_FILE", secret)
    options = load_settings(ElasticsearchSettings).elasticsearch.client_options()
    assert options["basic_auth"] == ("writer", "from-the-secret")


def test_a_missing_ca_file_stops_the_persister_naming_the_variable(clean_env: pytest.MonkeyPatch) -> None:
    from fluxgate_es_persister.app import make_sink

    clean_env.setenv("FLUXGATE_ES_ELASTICSEARCH__CA_CERTS", "/nowhere/ca.crt")
    with pytest.raises(ConfigError, match=r"\[env FLUXGATE_ES_ELASTICSEARCH__CA_CERTS\]: cannot read /nowhere/ca.crt"):
        make_sink(load_settings(ElasticsearchSettings))


def test_ids_are_fluxgates_unless_a_connector_config_asks_for_stream_reactors(clean_env: pytest.MonkeyPatch) -> None:
    assert load_settings(ElasticsearchSettings).sink.document_ids() is fluxgate_id
    clean_env.setenv("FLUXGATE_ES_SINK__DOCUMENT_ID", "stream-reactor")
    clean_env.setenv("FLUXGATE_ES_SINK__PK_SEPARATOR", "#")
    clean_env.setenv("FLUXGATE_ES_SINK__KCQL", "INSERT INTO i SELECT * FROM sensors")
    make_id = load_settings(ElasticsearchSettings).sink.document_ids()
    (statement,) = parse("INSERT INTO i SELECT * FROM sensors")
    assert make_id(record("sensors", 2, 9, {"sensor": "x"}), statement, {"sensor": "x"}) == "sensors#2#9"


@pytest.mark.parametrize(
    ("variables", "why"),
    [
        ({"FLUXGATE_ES_SINK__PK_SEPARATOR": "#"}, "pk_separator applies to document_id=stream-reactor only"),
        (
            {
                "FLUXGATE_ES_SINK__DOCUMENT_ID": "stream-reactor",
                "FLUXGATE_ES_SINK__KCQL": "UPSERT INTO i SELECT * FROM t",
            },
            "an UPSERT needs a PK",
        ),
    ],
)
def test_ids_settings_that_cannot_apply_are_refused(
    clean_env: pytest.MonkeyPatch, variables: dict[str, str], why: str
) -> None:
    for name, value in variables.items():
        clean_env.setenv(name, value)
    with pytest.raises(ConfigError, match=why):
        load_settings(ElasticsearchSettings)
