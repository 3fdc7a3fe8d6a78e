"""FLUXGATE_COAP_KCQL + FLUXGATE_COAP_SOURCE_URI: Stream-Reactor CoAP source KCQL becomes coap-ingest's resources."""

from __future__ import annotations

import json

import pytest
from fluxgate_testing.specs import load_with_env

from fluxgate_coap_ingest.settings import CoapIngestSettings
from fluxgate_core.errors import ConfigError

SEED = "INSERT INTO coap_sensor_topic SELECT * FROM sensors"  # the connector config we serve


def settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> CoapIngestSettings:
    return load_with_env(CoapIngestSettings, env, monkeypatch)  # type: ignore[no-any-return]


def config_error(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    with pytest.raises(ConfigError) as caught:
        settings(monkeypatch, **env)
    return str(caught.value)


def test_the_stream_reactor_example_observes_sensors_on_the_source_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = settings(monkeypatch, FLUXGATE_COAP_KCQL=SEED, FLUXGATE_COAP_SOURCE_URI="coap://localhost:5633")
    (resource,) = loaded.resources
    assert (resource.uri, resource.topic) == ("coap://localhost:5633/sensors", "coap_sensor_topic")
    # The payload's own device id wins; without one, the resource path is the device.
    assert (resource.routed_device(), resource.routed_metric(), resource.payload_format) == ("sensors", None, "auto")
    assert loaded.observed == loaded.resources


def test_several_resources_per_statement_and_several_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = settings(
        monkeypatch,
        FLUXGATE_COAP_KCQL="INSERT INTO a SELECT * FROM sensors, /lab/temp; INSERT INTO b SELECT * FROM `x y`",
        FLUXGATE_COAP_SOURCE_URI="coap+tcp://server:5683/",
    )
    assert [(r.uri, r.topic, r.device_id) for r in loaded.resources] == [
        ("coap+tcp://server:5683/sensors", "a", "sensors"),
        ("coap+tcp://server:5683/lab/temp", "a", "lab/temp"),
        ("coap+tcp://server:5683/x y", "b", "x y"),
    ]


def test_resources_the_old_way_keep_working(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = settings(monkeypatch, FLUXGATE_COAP_RESOURCES=json.dumps([{"uri": "coap://h/r", "topic": "t"}]))
    assert [(r.uri, r.topic) for r in loaded.resources] == [("coap://h/r", "t")]


def test_resources_and_kcql_both_set_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(
        monkeypatch,
        FLUXGATE_COAP_RESOURCES=json.dumps([{"uri": "coap://h/r"}]),
        FLUXGATE_COAP_KCQL=SEED,
        FLUXGATE_COAP_SOURCE_URI="coap://h",
    )
    assert "FLUXGATE_COAP_RESOURCES and FLUXGATE_COAP_KCQL are both set" in message


def test_kcql_needs_the_source_uri_and_the_other_way_round(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "FLUXGATE_COAP_KCQL needs FLUXGATE_COAP_SOURCE_URI" in config_error(monkeypatch, FLUXGATE_COAP_KCQL=SEED)
    message = config_error(monkeypatch, FLUXGATE_COAP_SOURCE_URI="coap://h")
    assert "FLUXGATE_COAP_SOURCE_URI is set without FLUXGATE_COAP_KCQL" in message


def test_a_source_uri_that_is_not_coap_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(monkeypatch, FLUXGATE_COAP_KCQL=SEED, FLUXGATE_COAP_SOURCE_URI="http://h:80")
    assert "source_uri [env FLUXGATE_COAP_SOURCE_URI]" in message and "coap://<host>[:port]" in message


def test_kcql_that_does_not_parse_names_the_variable_line_column_and_caret(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(
        monkeypatch, FLUXGATE_COAP_KCQL="INSERT INTO t SELECT * FROM", FLUXGATE_COAP_SOURCE_URI="coap://h"
    )
    assert message == (
        "invalid configuration:\n"
        "  kcql [env FLUXGATE_COAP_KCQL]: Value error, KCQL line 1, column 28: expected a topic or target name, "
        "found the end of the input\n"
        "    INSERT INTO t SELECT * FROM\n"
        "                               ^"
    )


@pytest.mark.parametrize(
    ("kcql", "says"),
    [
        ("INSERT INTO $ SELECT * FROM sensors", "INSERT INTO $ derives a Kafka topic from an MQTT topic"),
        ("INSERT INTO t SELECT * FROM sensors WITHKEY(a)", "WITHKEY makes no sense for the CoAP source"),
        ("INSERT INTO t SELECT * FROM sensors PK a", "PK makes no sense for the CoAP source"),
    ],
)
def test_what_the_coap_source_cannot_do_is_refused(monkeypatch: pytest.MonkeyPatch, kcql: str, says: str) -> None:
    assert says in config_error(monkeypatch, FLUXGATE_COAP_KCQL=kcql, FLUXGATE_COAP_SOURCE_URI="coap://h")


def test_coaps_source_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(monkeypatch, FLUXGATE_COAP_KCQL=SEED, FLUXGATE_COAP_SOURCE_URI="coaps://h")
    assert "no PSK is set (FLUXGATE_COAP_DTLS__PSK_KEY)" in message
