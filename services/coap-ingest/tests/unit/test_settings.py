"""Resource settings are validated at start and errors name the field and variable."""

from __future__ import annotations

import json

import pytest
from fluxgate_testing.specs import load_with_env

from fluxgate_coap_ingest.resource_settings import ResourceSettings, path_level
from fluxgate_coap_ingest.settings import CoapIngestSettings
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings

URI = "coap://127.0.0.1:5683/sensors/dev-1/temperature"


def load(monkeypatch: pytest.MonkeyPatch, resources: list[dict[str, object]], **env: str) -> CoapIngestSettings:
    env = {"FLUXGATE_COAP_RESOURCES": json.dumps(resources), **env}
    return load_with_env(CoapIngestSettings, env, monkeypatch)  # type: ignore[no-any-return]


def test_defaults_match_the_local_stack() -> None:
    settings = CoapIngestSettings()
    assert settings.http.port == 9102
    assert settings.resources == []
    assert settings.deadletter_topic == "sensors.deadletter"
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert settings.kafka.producer_config("coap-ingest")["linger.ms"] == 25


def test_setting_only_the_brokers_keeps_the_longer_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load(monkeypatch, [], FLUXGATE_COAP_KAFKA__BOOTSTRAP_SERVERS="kafka:9092")
    assert (settings.kafka.bootstrap_servers, settings.kafka.linger_ms) == ("kafka:9092", 25)
    settings = load(monkeypatch, [], FLUXGATE_COAP_KAFKA__LINGER_MS="5")
    assert settings.kafka.linger_ms == 5


def test_resources_come_from_json_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load(
        monkeypatch,
        [{"uri": URI, "device_id": "dev-1", "metric": "temperature"}, {"uri": URI, "topic": "other"}],
        FLUXGATE_COAP_OBSERVE__MAX_AGE_S="2.5",
    )
    first, second = settings.resources
    assert (first.device_id, first.metric, first.topic) == ("dev-1", "temperature", "sensors.readings")
    assert second.topic == "other"
    assert settings.observe.max_age_s == 2.5


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        ({"uri": "http://127.0.0.1/sensors/x"}, "scheme must be one of"),
        ({"uri": "coap:///sensors/x"}, "URI has no host"),
        ({"uri": "coap://127.0.0.1:5683/"}, "no resource path"),
        ({"uri": "coap://127.0.0.1:99999/x"}, "Port out of range"),
        ({"uri": URI, "device_from": "segment:1"}, "expected path:N"),
        ({"uri": URI, "metric_from": "path:3"}, "beyond the path levels"),
        ({"uri": URI, "payload_format": "xml"}, "payload_format"),
        ({"uri": URI, "psk_identity": "me", "psk_key": "k"}, "need a coaps:// URI"),
        ({"uri": URI.replace("coap:", "coaps:"), "psk_identity": "me"}, "go together"),
        ({"uri": URI, "colour": "red"}, "Extra inputs are not permitted"),
    ],
)
def test_bad_resources_fail_naming_the_field(
    monkeypatch: pytest.MonkeyPatch, resource: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=r"resources\.1\S* \[env FLUXGATE_COAP_RESOURCES\]") as caught:
        load(monkeypatch, [{"uri": URI}, resource])
    assert message in str(caught.value)


def test_coaps_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    secure = {"uri": "coaps://127.0.0.1/sensors/dev-1/temperature"}
    with pytest.raises(ConfigError, match=r"resources \[env FLUXGATE_COAP_RESOURCES\].*no PSK"):
        load(monkeypatch, [secure])
    settings = load(monkeypatch, [secure], FLUXGATE_COAP_DTLS__PSK_IDENTITY="gw", FLUXGATE_COAP_DTLS__PSK_KEY="secret")
    assert settings.resources[0].secure
    assert settings.dtls.psk_key is not None and settings.dtls.psk_key.get_secret_value() == "secret"
    assert "secret" not in repr(settings)


def test_default_key_needs_an_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"dtls \[env FLUXGATE_COAP_DTLS\].*psk_identity is required"):
        load(monkeypatch, [], FLUXGATE_COAP_DTLS__PSK_KEY="secret")


@pytest.mark.parametrize(
    ("rule", "level"), [("path:0", "sensors"), ("path:1", "dev-1"), ("path:-1", "temperature"), ("path:3", None)]
)
def test_path_levels(rule: str, level: str | None) -> None:
    assert path_level(URI, rule) == level


def test_explicit_routing_wins_over_path_levels() -> None:
    routed = ResourceSettings(uri=URI, device_from="path:1", metric_from="path:2")
    assert (routed.routed_device(), routed.routed_metric()) == ("dev-1", "temperature")
    explicit = ResourceSettings(uri=URI, device_id="boiler", metric="humidity", device_from="path:1")
    assert (explicit.routed_device(), explicit.routed_metric()) == ("boiler", "humidity")
    assert ResourceSettings(uri=URI).routed_device() is None
    assert explicit.host == "127.0.0.1"


def test_setting_only_the_http_host_keeps_the_service_port(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load(monkeypatch, [], FLUXGATE_COAP_HTTP__HOST="0.0.0.0")
    assert (settings.http.host, settings.http.port) == ("0.0.0.0", 9102)


@pytest.mark.parametrize("members", [1, 2, 3, 5])
def test_members_of_one_configuration_observe_every_resource_once(members: int) -> None:
    """The replicas of a StatefulSet share the resource list; pod i is member i of n."""
    resources = [{"uri": f"coap://10.0.0.{n}/sensors/temp"} for n in range(7)]
    observed = [
        resource.uri
        for member in range(members)
        for resource in CoapIngestSettings(resources=resources, member=member, members=members).observed
    ]
    assert sorted(observed) == sorted(r["uri"] for r in resources)  # each once, none left out
    shares = [len(CoapIngestSettings(resources=resources, member=m, members=members).observed) for m in range(members)]
    assert max(shares) - min(shares) <= 1  # as even as the count allows


def test_a_member_beyond_the_members_fails_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_COAP_MEMBERS", "2")
    monkeypatch.setenv("FLUXGATE_COAP_MEMBER", "2")
    with pytest.raises(ConfigError, match=r"member \[env FLUXGATE_COAP_MEMBER\]: .*below members \(2\)"):
        load_settings(CoapIngestSettings)


def test_the_output_format_is_readings_unless_coap_messages_are_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    assert CoapIngestSettings().output_format == "reading"
    settings = load(monkeypatch, [], FLUXGATE_COAP_OUTPUT_FORMAT="coap-message")
    assert settings.output_format == "coap-message"


def test_an_unknown_output_format_fails_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"output_format.*FLUXGATE_COAP_OUTPUT_FORMAT"):
        load(monkeypatch, [], FLUXGATE_COAP_OUTPUT_FORMAT="raw")


def test_the_output_limit_per_notification_is_a_setting_checked_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load(monkeypatch, [{"uri": URI}], FLUXGATE_COAP_LIMITS__MAX_OUTPUT_BYTES="65536")
    assert settings.limits.payload_limits().max_output_bytes == 65536
    with pytest.raises(ConfigError, match="FLUXGATE_COAP_LIMITS__MAX_OUTPUT_BYTES"):
        load(monkeypatch, [{"uri": URI}], FLUXGATE_COAP_LIMITS__MAX_OUTPUT_BYTES="0")


def test_records_are_avro_unless_the_output_says_kafka_connects_json_or_text(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load(monkeypatch, []).output.value_format == "avro"
    json_bare = {"FLUXGATE_COAP_OUTPUT__VALUE_FORMAT": "json", "FLUXGATE_COAP_OUTPUT__VALUE_SCHEMAS_ENABLE": "false"}
    output = load(monkeypatch, [], **json_bare).output
    assert (output.value_format, output.value_schemas_enable, output.uses_registry) == ("json", False, False)
    output = load(monkeypatch, [], FLUXGATE_COAP_OUTPUT__VALUE_FORMAT="json").output
    assert output.value_schemas_enable is True  # JsonConverter's envelope unless told otherwise
    assert load(monkeypatch, [], FLUXGATE_COAP_OUTPUT__VALUE_FORMAT="string").output.value_format == "string"


def test_the_value_format_and_the_record_are_set_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """OUTPUT_FORMAT says which record (readings or CoAP messages), OUTPUT__VALUE_FORMAT how it is written."""
    settings = load(
        monkeypatch, [], FLUXGATE_COAP_OUTPUT_FORMAT="coap-message", FLUXGATE_COAP_OUTPUT__VALUE_FORMAT="string"
    )
    assert (settings.output_format, settings.output.value_format) == ("coap-message", "string")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FLUXGATE_COAP_OUTPUT__VALUE_FORMAT", "bytes"),
        ("FLUXGATE_COAP_OUTPUT__VALUE_SCHEMAS_ENABLE", "maybe"),
        ("FLUXGATE_COAP_OUTPUT__KEY_FORMAT", "bytes"),
        ("FLUXGATE_COAP_OUTPUT__KEY_SCHEMAS_ENABLE", "maybe"),
    ],
)
def test_a_bad_output_fails_naming_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"\[env {name}\]"):
        load(monkeypatch, [], **{name: value})


def test_keys_are_text_unless_the_output_says_kafka_connects_json_or_avro(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load(monkeypatch, []).output.key_format == "string"
    json_bare = {"FLUXGATE_COAP_OUTPUT__KEY_FORMAT": "json", "FLUXGATE_COAP_OUTPUT__KEY_SCHEMAS_ENABLE": "false"}
    output = load(monkeypatch, [], **json_bare).output
    assert (output.key_format, output.key_schemas_enable) == ("json", False)
    assert load(monkeypatch, [], FLUXGATE_COAP_OUTPUT__KEY_FORMAT="avro").output.key_format == "avro"
