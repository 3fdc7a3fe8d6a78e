from __future__ import annotations

import json

import pytest
from fluxgate_testing.env import clean_env_fixture

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings
from fluxgate_mqtt_proxy.route_settings import RouteSettings
from fluxgate_mqtt_proxy.settings import ProxySettings

clean_env = clean_env_fixture("FLUXGATE_MQTT_")


def routes_env(monkeypatch: pytest.MonkeyPatch, routes: list[dict[str, object]]) -> None:
    monkeypatch.setenv("FLUXGATE_MQTT_ROUTES", json.dumps(routes))


def test_defaults_work_with_the_local_stack_and_the_simulator() -> None:
    settings = load_settings(ProxySettings)
    assert settings.http.port == 9101
    assert settings.mqtt.host == "127.0.0.1"
    assert settings.mqtt.port == 1883
    assert settings.mqtt.protocol_version == 5
    assert settings.mqtt.clean_start is False
    assert settings.mqtt.session_expiry_s == 86_400
    assert [route.filter for route in settings.routes] == ["sensors/+/+", "devices/+/senml"]
    assert {route.topic for route in settings.routes} == {"sensors.readings"}
    assert settings.deadletter_topic == "sensors.deadletter"


def test_routes_come_from_json(clean_env: pytest.MonkeyPatch) -> None:
    routes_env(
        clean_env,
        [
            {"filter": "sensors/+/temperature", "device_from": "topic:1", "metric_from": "topic:2", "qos": 2},
            {"filter": "$share/p/raw/#", "topic": "raw.readings", "format": "cbor", "fields": {"device": "id"}},
        ],
    )
    first, second = load_settings(ProxySettings).routes
    assert (first.filter, first.device_from, first.metric_from) == ("sensors/+/temperature", "topic:1", "topic:2")
    assert first.qos == 2
    assert (second.topic, second.format, second.fields.device, second.qos) == ("raw.readings", "cbor", "id", 1)


def test_nested_groups_use_double_underscore(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_MQTT_MQTT__PROTOCOL_VERSION", "4")
    clean_env.setenv("FLUXGATE_MQTT_MQTT__PASSWORD", "s3cret")
    clean_env.setenv("FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS", "kafka:9092")
    clean_env.setenv("FLUXGATE_MQTT_HTTP__HOST", "127.0.0.1")
    settings = load_settings(ProxySettings)
    assert settings.mqtt.protocol_version == 4
    assert settings.kafka.bootstrap_servers == "kafka:9092"
    assert settings.http.port == 9101  # setting only the host keeps the service's port
    assert "s3cret" not in repr(settings)
    assert settings.mqtt.password is not None and settings.mqtt.password.get_secret_value() == "s3cret"


@pytest.mark.parametrize(
    ("route", "field"),
    [
        ({"filter": "sensors/#/x"}, "routes.0.filter"),
        ({"filter": "$share/g"}, "routes.0.filter"),
        ({"filter": "a/+", "device_from": "header:x"}, "routes.0.device_from"),
        ({"filter": "a/+", "metric_from": "topic:one"}, "routes.0.metric_from"),
        ({"filter": "a/+", "qos": 3}, "routes.0.qos"),
        ({"filter": "a/+", "format": "xml"}, "routes.0.format"),
        ({"filter": "a/+", "colour": "red"}, "routes.0.colour"),
    ],
)
def test_bad_route_names_field_and_env_var(clean_env: pytest.MonkeyPatch, route: dict[str, object], field: str) -> None:
    routes_env(clean_env, [route])
    with pytest.raises(ConfigError) as caught:
        load_settings(ProxySettings)
    assert field in str(caught.value)
    assert "FLUXGATE_MQTT_ROUTES" in str(caught.value)


@pytest.mark.parametrize(
    ("route", "field"),
    [
        ({"filter": "sensors/+", "device_from": "topic:2"}, "device_from"),
        ({"filter": "sensors/#", "metric_from": "topic:1"}, "metric_from"),
        ({"filter": "$share/g/sensors/+", "metric_from": "topic:2"}, "metric_from"),
    ],
)
def test_level_beyond_the_filter_is_rejected(
    clean_env: pytest.MonkeyPatch, route: dict[str, object], field: str
) -> None:
    routes_env(clean_env, [{"device_from": "payload", **route}])
    with pytest.raises(ConfigError) as caught:
        load_settings(ProxySettings)
    assert f"{field}: level" in str(caught.value)
    assert "is beyond the fixed levels" in str(caught.value)
    assert "[env FLUXGATE_MQTT_ROUTES]" in str(caught.value)


def test_level_within_a_shared_filter_counts_without_the_prefix() -> None:
    route = RouteSettings(filter="$share/g/sensors/+/+", device_from="topic:1", metric_from="topic:2")
    assert route.topic_level("metric_from") == 2


@pytest.mark.parametrize(
    ("name", "value", "env"),
    [
        ("FLUXGATE_MQTT_ROUTES", "not json", "FLUXGATE_MQTT_ROUTES"),
        ("FLUXGATE_MQTT_ROUTES", "[]", "FLUXGATE_MQTT_ROUTES"),
        ("FLUXGATE_MQTT_MQTT__PROTOCOL_VERSION", "3", "FLUXGATE_MQTT_MQTT__PROTOCOL_VERSION"),
        ("FLUXGATE_MQTT_MQTT__PORT", "70000", "FLUXGATE_MQTT_MQTT__PORT"),
        ("FLUXGATE_MQTT_MQTT__SHARE_GROUP", "a/b", "FLUXGATE_MQTT_MQTT__SHARE_GROUP"),
        ("FLUXGATE_MQTT_MAX_IN_FLIGHT", "0", "FLUXGATE_MQTT_MAX_IN_FLIGHT"),
        ("FLUXGATE_MQTT_HTTP__PORT", "-1", "FLUXGATE_MQTT_HTTP__PORT"),
        ("FLUXGATE_MQTT_LIMITS__MAX_OUTPUT_BYTES", "0", "FLUXGATE_MQTT_LIMITS__MAX_OUTPUT_BYTES"),
        ("FLUXGATE_MQTT_OUTPUT__VALUE_FORMAT", "bytes", "FLUXGATE_MQTT_OUTPUT__VALUE_FORMAT"),
        ("FLUXGATE_MQTT_OUTPUT__VALUE_SCHEMAS_ENABLE", "maybe", "FLUXGATE_MQTT_OUTPUT__VALUE_SCHEMAS_ENABLE"),
        ("FLUXGATE_MQTT_OUTPUT__KEY_FORMAT", "bytes", "FLUXGATE_MQTT_OUTPUT__KEY_FORMAT"),
        ("FLUXGATE_MQTT_OUTPUT__KEY_SCHEMAS_ENABLE", "maybe", "FLUXGATE_MQTT_OUTPUT__KEY_SCHEMAS_ENABLE"),
    ],
)
def test_bad_values_name_the_env_var(clean_env: pytest.MonkeyPatch, name: str, value: str, env: str) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings(ProxySettings)
    assert env in str(caught.value)


def test_settings_are_frozen() -> None:
    settings = load_settings(ProxySettings)
    with pytest.raises(ValueError):
        settings.deadletter_topic = "x"  # type: ignore[misc]


def test_the_output_limit_per_message_is_a_setting(clean_env: pytest.MonkeyPatch) -> None:
    assert load_settings(ProxySettings).limits.payload_limits().max_output_bytes == 1024 * 1024
    clean_env.setenv("FLUXGATE_MQTT_LIMITS__MAX_OUTPUT_BYTES", "65536")
    assert load_settings(ProxySettings).limits.payload_limits().max_output_bytes == 65536


def test_records_are_avro_unless_the_output_says_kafka_connects_json_or_text(clean_env: pytest.MonkeyPatch) -> None:
    assert load_settings(ProxySettings).output.value_format == "avro"
    clean_env.setenv("FLUXGATE_MQTT_OUTPUT__VALUE_FORMAT", "json")
    clean_env.setenv("FLUXGATE_MQTT_OUTPUT__VALUE_SCHEMAS_ENABLE", "false")
    output = load_settings(ProxySettings).output
    assert (output.value_format, output.value_schemas_enable, output.uses_registry) == ("json", False, False)
    clean_env.setenv("FLUXGATE_MQTT_OUTPUT__VALUE_FORMAT", "string")
    assert load_settings(ProxySettings).output.value_format == "string"


def test_keys_are_text_unless_the_output_says_kafka_connects_json_or_avro(clean_env: pytest.MonkeyPatch) -> None:
    output = load_settings(ProxySettings).output
    assert (output.key_format, output.key_schemas_enable) == ("string", True)
    clean_env.setenv("FLUXGATE_MQTT_OUTPUT__KEY_FORMAT", "json")
    clean_env.setenv("FLUXGATE_MQTT_OUTPUT__KEY_SCHEMAS_ENABLE", "false")
    clean_env.setenv("FLUXGATE_MQTT_OUTPUT__VALUE_FORMAT", "string")
    output = load_settings(ProxySettings).output
    assert (output.key_format, output.key_schemas_enable, output.uses_registry) == ("json", False, False)
    clean_env.setenv("FLUXGATE_MQTT_OUTPUT__KEY_FORMAT", "avro")
    assert load_settings(ProxySettings).output.uses_registry  # Avro keys are registered, whatever the values
