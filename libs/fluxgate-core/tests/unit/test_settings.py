import json
from pathlib import Path

import pytest
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import (
    HttpSettings,
    KafkaSettings,
    RegistrySettings,
    group,
    load_settings,
    service_config,
)


class DemoSettings(BaseSettings):
    model_config = service_config("FLUXGATE_DEMO_")
    kafka: KafkaSettings = KafkaSettings()
    registry: RegistrySettings = RegistrySettings()
    http: HttpSettings = HttpSettings()
    topic: str = Field("sensors.readings", min_length=1)


def test_defaults_work_with_the_local_stack() -> None:
    settings = load_settings(DemoSettings)
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert settings.registry.url.endswith("/apis/ccompat/v7")


def test_nested_env_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__BOOTSTRAP_SERVERS", "k1:9092,k2:9092")
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__EXTRA", '{"batch.size": "65536"}')
    monkeypatch.setenv("FLUXGATE_DEMO_HTTP__PORT", "9200")
    settings = load_settings(DemoSettings)
    config = settings.kafka.producer_config("demo")
    assert config["bootstrap.servers"] == "k1:9092,k2:9092"
    assert config["batch.size"] == "65536"
    assert config["enable.idempotence"] is True and config["acks"] == "all"
    assert config["client.id"] == "demo"
    assert settings.http.port == 9200


def test_a_group_instance_id_makes_the_consumer_a_static_member(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "group.instance.id" not in load_settings(DemoSettings).kafka.consumer_config("g", "demo")
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__GROUP_INSTANCE_ID", "es-persister-7d9f-abcde")
    kafka = load_settings(DemoSettings).kafka
    assert kafka.consumer_config("g", "demo")["group.instance.id"] == "es-persister-7d9f-abcde"
    assert "group.instance.id" not in kafka.producer_config("demo")  # a consumer's, never a producer's
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__GROUP_INSTANCE_ID", "")
    with pytest.raises(ConfigError, match=r"FLUXGATE_DEMO_KAFKA__GROUP_INSTANCE_ID"):
        load_settings(DemoSettings)


def test_an_assigned_consumer_names_its_group_by_purpose_and_is_never_a_static_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__GROUP_INSTANCE_ID", "status-0")
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__EXTRA", '{"fetch.max.bytes": "1048576"}')
    config = load_settings(DemoSettings).kafka.assigned_consumer_config("demo", "watermarks")
    assert config["group.id"] == "demo-watermarks" and config["enable.auto.commit"] is False
    assert "group.instance.id" not in config  # joins no group: the static id is the service member's alone
    assert config["fetch.max.bytes"] == "1048576"
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__CLIENT_ID", "status-eu")
    assert load_settings(DemoSettings).kafka.assigned_consumer_config("demo", "watermarks")["group.id"] == (
        "status-eu-watermarks"
    )


def test_a_variable_under_the_prefix_naming_no_setting_fails_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    # A typo or a renamed setting would otherwise be ignored and the default used silently.
    monkeypatch.setenv("FLUXGATE_DEMO_TOPICS", "other.readings")
    with pytest.raises(ConfigError, match=r"\[env FLUXGATE_DEMO_TOPICS\]: not a setting of this service") as raised:
        load_settings(DemoSettings)
    assert str(raised.value).endswith("FLUXGATE_DEMO_TOPIC)")  # the settings it has, to spot the typo
    monkeypatch.delenv("FLUXGATE_DEMO_TOPICS")
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__BOOTSTRAP_SERVER", "k1:9092")  # a group's unknown key
    with pytest.raises(ConfigError, match=r"FLUXGATE_DEMO_KAFKA__BOOTSTRAP_SERVER"):
        load_settings(DemoSettings)
    monkeypatch.delenv("FLUXGATE_DEMO_KAFKA__BOOTSTRAP_SERVER")
    monkeypatch.setenv("FLUXGATE_DEMOS_TOPIC", "x")  # another prefix: not this service's
    assert load_settings(DemoSettings).topic == "sensors.readings"


def test_bad_value_names_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_DEMO_HTTP__PORT", "99999")
    with pytest.raises(ConfigError, match=r"http\.port \[env FLUXGATE_DEMO_HTTP__PORT\]"):
        load_settings(DemoSettings)


def test_bad_choice_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__SECURITY_PROTOCOL", "TLS")
    with pytest.raises(ConfigError, match=r"FLUXGATE_DEMO_KAFKA__SECURITY_PROTOCOL.*got 'TLS'"):
        load_settings(DemoSettings)


def test_unknown_nested_key_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__BOOTSTRAP", "oops:9092")
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap"):
        load_settings(DemoSettings)


def test_secrets_do_not_leak_into_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    sasl_env(monkeypatch, FLUXGATE_DEMO_KAFKA__SASL_PASSWORD="hunter2")
    settings = load_settings(DemoSettings)
    assert "hunter2" not in repr(settings)
    assert settings.kafka.client_config("x")["sasl.password"] == "hunter2"


def sasl_env(monkeypatch: pytest.MonkeyPatch, **more: str) -> None:
    env = {
        "FLUXGATE_DEMO_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "FLUXGATE_DEMO_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "FLUXGATE_DEMO_KAFKA__SASL_USERNAME": "aggregator",
        **more,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_the_sasl_password_comes_from_its_file_read_at_each_connection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = tmp_path / "password"
    secret.write_text("first\n")
    sasl_env(monkeypatch, FLUXGATE_DEMO_KAFKA__SASL_PASSWORD_FILE=str(secret))
    settings = load_settings(DemoSettings)
    assert settings.kafka.client_config("x")["sasl.password"] == "first"
    secret.write_text("rotated")
    assert settings.kafka.client_config("x")["sasl.password"] == "rotated"
    assert "rotated" not in repr(settings) and "first" not in repr(settings)


@pytest.mark.parametrize(
    ("env", "named", "reason"),
    [
        ({"FLUXGATE_DEMO_KAFKA__SASL_MECHANISM": ""}, "KAFKA__SASL_MECHANISM", "required with security_protocol"),
        ({"FLUXGATE_DEMO_KAFKA__SASL_USERNAME": ""}, "KAFKA__SASL_USERNAME", "required with security_protocol"),
        ({}, "KAFKA__SASL_PASSWORD_FILE", "a password is required"),
        ({"FLUXGATE_DEMO_KAFKA__SASL_PASSWORD_FILE": "/no/such/file"}, "KAFKA__SASL_PASSWORD_FILE", "cannot read"),
        (
            {"FLUXGATE_DEMO_KAFKA__SASL_PASSWORD_FILE": "/dev/null", "FLUXGATE_DEMO_KAFKA__SASL_PASSWORD": "x"},
            "KAFKA__SASL_PASSWORD_FILE",
            "not both",
        ),
        ({"FLUXGATE_DEMO_KAFKA__SASL_PASSWORD_FILE": "/dev/null"}, "KAFKA__SASL_PASSWORD_FILE", "is empty"),
        (
            {"FLUXGATE_DEMO_KAFKA__SECURITY_PROTOCOL": "SSL", "FLUXGATE_DEMO_KAFKA__SASL_PASSWORD": "x"},
            "KAFKA__SECURITY_PROTOCOL",
            "uses no SASL",
        ),
    ],
)
def test_incomplete_sasl_settings_fail_at_start_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str, reason: str
) -> None:
    sasl_env(monkeypatch)
    for name, value in env.items():
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name)
    with pytest.raises(ConfigError) as error:
        load_settings(DemoSettings)
    assert f"[env FLUXGATE_DEMO_{named}]" in str(error.value)
    assert reason in str(error.value)


def test_a_secret_in_the_plain_extra_properties_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'
    monkeypatch.setenv("FLUXGATE_DEMO_KAFKA__EXTRA", json.dumps({"sasl.jaas.config": jaas}))
    with pytest.raises(ConfigError) as error:
        load_settings(DemoSettings)
    assert "[env FLUXGATE_DEMO_KAFKA__EXTRA]" in str(error.value)
    assert "password=" not in str(error.value), "the refusal must not print the secret it refuses"


def test_settings_are_frozen() -> None:
    settings = load_settings(DemoSettings)
    with pytest.raises(Exception, match="frozen"):
        settings.topic = "other"  # type: ignore[misc]


class _Service(BaseSettings):
    model_config = service_config("FLUXGATE_DEMO_")

    http: HttpSettings = group(HttpSettings, port=9199)


def test_a_groups_service_default_holds_with_none_some_or_all_of_its_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _Service().http == HttpSettings(port=9199)
    monkeypatch.setenv("FLUXGATE_DEMO_HTTP__HOST", "127.0.0.1")
    assert _Service().http == HttpSettings(host="127.0.0.1", port=9199)  # the host alone keeps the port
    monkeypatch.setenv("FLUXGATE_DEMO_HTTP__PORT", "8000")
    assert _Service().http.port == 8000
    assert _Service(http=HttpSettings(host="h")).http.port == 9199
    monkeypatch.setenv("FLUXGATE_DEMO_HTTP__PORT", "70000")
    with pytest.raises(ConfigError, match=r"http.port \[env FLUXGATE_DEMO_HTTP__PORT\]"):
        load_settings(_Service)


class CheckedSecretSettings(BaseSettings):
    model_config = service_config("FLUXGATE_DEMO_")
    key: SecretStr | None = None

    @field_validator("key")
    @classmethod
    def _short(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) > 4:
            raise ValueError("takes at most 4 characters")
        return value


def test_a_refused_secret_is_named_but_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_DEMO_KEY", "hunter2-and-more")
    with pytest.raises(ConfigError) as refused:
        load_settings(CheckedSecretSettings)
    assert "FLUXGATE_DEMO_KEY" in str(refused.value) and "at most 4" in str(refused.value)
    assert "hunter2" not in str(refused.value)
