"""FLUXGATE_MQTT_KCQL: Stream-Reactor MQTT source KCQL becomes the proxy's routes, keys and topics."""

from __future__ import annotations

import asyncio
import io
import json
import re
from typing import Any

import fastavro
import pytest
from fluxgate_testing.specs import load_with_env

from fluxgate_core.errors import ConfigError, InvalidReading
from fluxgate_core.gateway import SubjectRefused
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder
from fluxgate_mqtt_proxy.convert import MessageConverter
from fluxgate_mqtt_proxy.kcql import routes_from_kcql
from fluxgate_mqtt_proxy.route_settings import RouteSettings
from fluxgate_mqtt_proxy.settings import ProxySettings
from fluxgate_mqtt_proxy.topic_routes import compile_routes
from fluxgate_mqtt_proxy.topics import DerivedTargets, kafka_topic_for

NOW = 1_700_000_000_000
PARSED = fastavro.parse_schema(schema_dict(SENSOR_READING))
JSON_SIMPLE = "io.lenses.streamreactor.connect.converters.source.JsonSimpleConverter"


def config_error(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_with_env(ProxySettings, env, monkeypatch)
    return str(caught.value)


def converter(routes: list[RouteSettings], registered: list[str] | None = None, **derived: Any) -> MessageConverter:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), schema_id=7)

    def register(topics: object) -> dict[str, AvroEncoder | SubjectRefused]:
        names = sorted(topics)  # type: ignore[call-overload]
        (registered if registered is not None else []).extend(names)
        return {name: SubjectRefused(f"refused {name}") if "refused" in name else encoder for name in names}

    if "pattern" in derived:
        derived["pattern"] = re.compile(derived["pattern"])
    return MessageConverter(routes, {}, register=register, derived=DerivedTargets(**derived))


def reading(value: bytes) -> dict[str, object]:
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), PARSED, None)
    assert isinstance(record, dict)
    return record


def test_statements_become_routes_with_the_defaults_for_a_whole_payload(monkeypatch: pytest.MonkeyPatch) -> None:
    kcql = (
        f"INSERT INTO readings SELECT * FROM /plant/+/temp WITHCONVERTER=`{JSON_SIMPLE}`;\n"
        "INSERT INTO `$` SELECT * FROM '$share/g/devices/#' WITHKEY(sensorId, site) KEYDELIMITER='-'"
    )
    settings = load_with_env(ProxySettings, {"FLUXGATE_MQTT_KCQL": kcql}, monkeypatch)
    first, second = settings.routes
    assert (first.filter, first.topic, first.format, first.key_fields) == ("/plant/+/temp", "readings", "json", [])
    assert (first.device_from, first.metric_from) == ("topic", "payload")
    assert (second.filter, second.topic, second.format) == ("$share/g/devices/#", "$", "auto")
    assert (second.key_fields, second.key_delimiter, second.topic_separator) == (["sensorId", "site"], "-", "_")
    assert [route.subscription for route in compile_routes(settings.routes)] == ["/plant/+/temp", "$share/g/devices/#"]


def test_every_kcql_subscription_takes_the_kcql_qos(monkeypatch: pytest.MonkeyPatch) -> None:
    kcql = "INSERT INTO a SELECT * FROM x/+; INSERT INTO b SELECT * FROM y/#"
    default = load_with_env(ProxySettings, {"FLUXGATE_MQTT_KCQL": kcql}, monkeypatch)
    assert [route.qos for route in default.routes] == [1, 1]  # at least once, unless asked
    chosen = load_with_env(ProxySettings, {"FLUXGATE_MQTT_KCQL": kcql, "FLUXGATE_MQTT_KCQL_QOS": "2"}, monkeypatch)
    assert [route.qos for route in chosen.routes] == [2, 2]


def test_a_kcql_qos_mqtt_has_not_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(monkeypatch, FLUXGATE_MQTT_KCQL="INSERT INTO a SELECT * FROM x", FLUXGATE_MQTT_KCQL_QOS="3")
    assert "kcql_qos [env FLUXGATE_MQTT_KCQL_QOS]" in message


def test_the_routes_keep_working_without_kcql(monkeypatch: pytest.MonkeyPatch) -> None:
    routes = json.dumps([{"filter": "x/+", "topic": "t"}])
    (route,) = load_with_env(ProxySettings, {"FLUXGATE_MQTT_ROUTES": routes}, monkeypatch).routes
    assert (route.filter, route.topic, route.device_from) == ("x/+", "t", "payload")


def test_routes_and_kcql_both_set_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(
        monkeypatch,
        FLUXGATE_MQTT_ROUTES=json.dumps([{"filter": "x/+"}]),
        FLUXGATE_MQTT_KCQL="INSERT INTO t SELECT * FROM x/+",
    )
    assert "FLUXGATE_MQTT_ROUTES and FLUXGATE_MQTT_KCQL are both set" in message


def test_kcql_that_does_not_parse_names_the_variable_line_column_and_caret(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(
        monkeypatch, FLUXGATE_MQTT_KCQL="INSERT INTO t SELECT * FROM a/+;\nINSERT INTO u SELEC * FROM b"
    )
    assert message == (
        "invalid configuration:\n"
        "  kcql [env FLUXGATE_MQTT_KCQL]: Value error, KCQL line 2, column 15: expected SELECT, found 'SELEC'\n"
        "    INSERT INTO u SELEC * FROM b\n"
        "                  ^"
    )


def test_a_refused_converter_names_it_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    converter_class = "com.datamountaineer.streamreactor.connect.converters.source.BytesConverter"
    message = config_error(
        monkeypatch, FLUXGATE_MQTT_KCQL=f"INSERT INTO t SELECT * FROM a WITHCONVERTER=`{converter_class}`"
    )
    assert "kcql [env FLUXGATE_MQTT_KCQL]" in message
    assert "converter BytesConverter is not supported: it forwards the payload as opaque bytes" in message


def test_a_filter_mqtt_refuses_names_the_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(monkeypatch, FLUXGATE_MQTT_KCQL="INSERT INTO t SELECT * FROM a/#/b")
    assert "kcql [env FLUXGATE_MQTT_KCQL]" in message and "'INSERT INTO t SELECT * FROM a/#/b'" in message
    assert "'#' must be the whole last level" in message


def test_separator_must_be_legal_in_a_kafka_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    message = config_error(
        monkeypatch, FLUXGATE_MQTT_KCQL="INSERT INTO $ SELECT * FROM a/#", FLUXGATE_MQTT_KCQL_TOPIC_SEPARATOR="/"
    )
    assert "kcql_topic_separator [env FLUXGATE_MQTT_KCQL_TOPIC_SEPARATOR]" in message


@pytest.mark.parametrize(
    ("mqtt", "separator", "kafka"),
    [
        ("/I/Love/Kafka", "_", "I_Love_Kafka"),  # the leading '/' goes
        ("device/device1/variable/var1", "_", "devicedevice1_variable_var1"),  # so does a first '/' elsewhere
        ("/a//b", "_", "a_b"),  # a run of '/' is one separator
        ("/plant/line-1/temp", ".", "plant.line-1.temp"),
        ("/plant/line-1/temp", "", "plantline-1temp"),
        ("single", "_", "single"),
    ],
)
def test_dollar_topic_is_stream_reactors_rule_with_our_separator(mqtt: str, separator: str, kafka: str) -> None:
    assert kafka_topic_for(mqtt, separator) == kafka


def test_dollar_routes_register_each_derived_topic_once_and_produce_to_it() -> None:
    registered: list[str] = []
    routes = routes_from_kcql("INSERT INTO $ SELECT * FROM /plant/#", topic_separator=".")
    convert = converter(routes, registered)
    asyncio.run(convert.prepare(["/plant/a/temp", "/plant/b/temp", "/plant/a/temp"]))
    assert registered == ["plant.a.temp", "plant.b.temp"]
    (record,) = convert.convert("/plant/a/temp", b'{"temperature": 20.5}', {}, NOW)
    assert record.topic == "plant.a.temp"
    # No device field in the payload: the device is the MQTT topic, and so is the key.
    assert (reading(record.value)["device_id"], record.key) == ("/plant/a/temp", b"/plant/a/temp")
    asyncio.run(convert.prepare(["/plant/a/temp"]))
    assert registered == ["plant.a.temp", "plant.b.temp"]


def test_a_derived_name_kafka_refuses_is_a_reading_to_dead_letter() -> None:
    convert = converter(routes_from_kcql("INSERT INTO $ SELECT * FROM /plant/#"))
    with pytest.raises(InvalidReading) as caught:
        convert.convert("/plant/hälle", b'{"sensorId": "d1", "temperature": 1}', {}, NOW)
    assert "gives Kafka topic 'plant_hälle' (INSERT INTO $): a Kafka topic name holds only ASCII" in str(caught.value)


def test_withkey_joins_the_payloads_fields_and_the_readings() -> None:
    routes = routes_from_kcql(
        "INSERT INTO t SELECT * FROM s/+ WITHKEY(site.building, sensorId, metric) KEYDELIMITER='|'"
    )
    payload = b'{"sensorId": "d1", "site": {"building": 7}, "temperature": 20.5, "humidity": 40}'
    records = converter(routes).convert("s/x", payload, {}, NOW)
    assert sorted(record.key for record in records) == [b"7|d1|humidity", b"7|d1|temperature"]
    assert {reading(record.value)["device_id"] for record in records} == {"d1"}


def test_withkey_field_missing_is_a_reading_to_dead_letter() -> None:
    routes = routes_from_kcql("INSERT INTO t SELECT * FROM s/+ WITHKEY(site)")
    with pytest.raises(InvalidReading, match="WITHKEY field site is not in the reading nor the payload"):
        converter(routes).convert("s/x", b'{"sensorId": "d1", "temperature": 20.5}', {}, NOW)


def test_without_withkey_the_key_is_the_device_id() -> None:
    (record,) = converter(routes_from_kcql("INSERT INTO t SELECT * FROM s/+")).convert(
        "s/x", b'{"sensorId": "d1", "temperature": 20.5}', {}, NOW
    )
    assert (record.topic, record.key) == ("t", b"d1")


DOLLAR = "INSERT INTO $ SELECT * FROM /plant/#"
JSON_READING = b'{"sensorId": "d1", "temperature": 1}'


def test_a_derived_topic_outside_the_allowed_pattern_is_dead_lettered_and_never_registered() -> None:
    registered: list[str] = []
    convert = converter(routes_from_kcql(DOLLAR, topic_separator="."), registered, pattern=r"plant\.line-\d+")
    asyncio.run(convert.prepare(["/plant/line-1", "/plant/temperatures/aggregated"]))
    assert registered == ["plant.line-1"]
    assert convert.convert("/plant/line-1", JSON_READING, {}, NOW)[0].topic == "plant.line-1"
    with pytest.raises(InvalidReading, match=r"'plant.temperatures.aggregated' does not match .*PATTERN"):
        convert.convert("/plant/temperatures/aggregated", JSON_READING, {}, NOW)


def test_the_dead_letter_topic_and_kafkas_own_topics_are_never_derived_targets() -> None:
    routes = routes_from_kcql("INSERT INTO $ SELECT * FROM #", topic_separator=".")
    convert = converter(routes, refused=frozenset({"dlq"}))
    for mqtt_topic in ("dlq", "__consumer_offsets", "_schemas"):
        with pytest.raises(InvalidReading, match="derived Kafka topic"):
            convert.convert(mqtt_topic, JSON_READING, {}, NOW)


def test_derived_topics_past_the_bound_are_dead_lettered_and_never_registered() -> None:
    registered: list[str] = []
    convert = converter(routes_from_kcql(DOLLAR, topic_separator="."), registered, max_topics=2)
    asyncio.run(convert.prepare([f"/plant/t{n}" for n in range(5)]))
    assert registered == ["plant.t0", "plant.t1"]
    assert convert.convert("/plant/t1", JSON_READING, {}, NOW)[0].topic == "plant.t1"
    for mqtt_topic in ("/plant/t2", "/plant/t9"):  # prepared or not: past the bound either way
        with pytest.raises(InvalidReading, match="more than 2 distinct Kafka topics"):
            convert.convert(mqtt_topic, JSON_READING, {}, NOW)
    assert registered == ["plant.t0", "plant.t1"]


def test_a_subject_the_registry_refuses_dead_letters_its_messages_and_is_asked_once() -> None:
    registered: list[str] = []
    convert = converter(routes_from_kcql(DOLLAR, topic_separator="."), registered)
    for _ in range(2):
        asyncio.run(convert.prepare(["/plant/refused"]))
        with pytest.raises(SubjectRefused, match=r"refused plant\.refused"):
            convert.convert("/plant/refused", JSON_READING, {}, NOW)
    assert registered == ["plant.refused"]


@pytest.mark.parametrize(
    ("env", "value"),
    [("FLUXGATE_MQTT_DERIVED_TOPICS__PATTERN", "plant.("), ("FLUXGATE_MQTT_DERIVED_TOPICS__MAX_TOPICS", "0")],
)
def test_bad_derived_topic_settings_fail_the_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    assert env in config_error(monkeypatch, FLUXGATE_MQTT_KCQL=DOLLAR, **{env: value})


def test_derived_topic_settings_reach_the_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"FLUXGATE_MQTT_DERIVED_TOPICS__PATTERN": "plant[.].+", "FLUXGATE_MQTT_DERIVED_TOPICS__MAX_TOPICS": "7"}
    settings = load_with_env(ProxySettings, {"FLUXGATE_MQTT_DEADLETTER_TOPIC": "dead", **env}, monkeypatch)
    targets = settings.derived_targets()
    assert (targets.pattern.pattern, targets.max_topics, targets.refused) == ("plant[.].+", 7, frozenset({"dead"}))
