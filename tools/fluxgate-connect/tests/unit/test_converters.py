"""A sink config's converters: JsonConverter values (with or without schemas) become the persister's
value format, StringConverter values are JSON text, a JsonConverter key is the key format (read
where a PK names _key), bytes values are refused naming what to write instead. The MQTT and CoAP
sources write their records as their value.converter says (Avro, JsonConverter's JSON with or
without schemas, StringConverter's text), and their keys as their key.converter says (text for
StringConverter, ByteArrayConverter or none; JsonConverter's with or without schemas; Avro), by one rule."""

from __future__ import annotations

import pytest
from connect_fixtures import load_env

from fluxgate_connect.connectors import (
    CASSANDRA_SINK,
    COAP_SOURCE,
    ELASTIC_SINK,
    HAZELCAST_SINK,
    MQTT_SOURCE,
    Connector,
)
from fluxgate_connect.errors import ConnectError
from fluxgate_connect.rules import Setting
from fluxgate_connect.translate import Translation, translate

JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
AVRO = "io.confluent.connect.avro.AvroConverter"
ES = "io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector"
MQTT = "io.lenses.streamreactor.connect.mqtt.source.MqttSourceConnector"
KCQL = {
    ELASTIC_SINK.service: ("connect.elastic.kcql", "INSERT INTO readings SELECT * FROM readings.json"),
    CASSANDRA_SINK.service: ("connect.cassandra.kcql", "INSERT INTO readings SELECT * FROM readings.json"),
    HAZELCAST_SINK.service: (
        "connect.hazelcast.kcql",
        "INSERT INTO readings SELECT * FROM readings.json STOREAS QUEUE",
    ),
}


def sink(connector: Connector, **converters: str) -> Translation:
    key, kcql = KCQL[connector.service]
    config = {"connector.class": connector.classes[-1], key: kcql, "connect.cassandra.key.space": "k"}
    if connector is not CASSANDRA_SINK:
        config.pop("connect.cassandra.key.space")
    return translate(config | {name.replace("_", "."): value for name, value in converters.items()})


@pytest.mark.parametrize("connector", [ELASTIC_SINK, CASSANDRA_SINK, HAZELCAST_SINK], ids=lambda c: c.service)
@pytest.mark.parametrize("schemas", ["true", "false"])
def test_json_values_with_or_without_schemas_on_every_sink(
    connector: Connector, schemas: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = sink(connector, value_converter=JSON, value_converter_schemas_enable=schemas, key_converter=STRING)
    assert result.values["sink.value_format"] == "json"
    assert result.values["sink.value_schemas_enable"] == schemas
    settings = load_env(connector.settings, result.env, monkeypatch)  # the persister takes what it is given
    assert (settings.sink.value_format, settings.sink.value_schemas_enable) == ("json", schemas == "true")


def test_json_values_read_the_envelope_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    result = sink(ELASTIC_SINK, value_converter=JSON)  # JsonConverter's schemas.enable defaults to true
    settings = load_env(ELASTIC_SINK.settings, result.env, monkeypatch)
    assert settings.sink.value_format == "json" and settings.sink.value_schemas_enable is True


def test_avro_values_set_nothing_and_ignore_schemas_enable() -> None:
    result = sink(ELASTIC_SINK, value_converter=AVRO,
                  value_converter_schemas_enable="false", key_converter_schemas_enable="false")  # fmt: skip
    assert "sink.value_format" not in result.values and "sink.value_schemas_enable" not in result.values
    assert any(note.startswith("value.converter.schemas.enable: nothing to set") for note in result.notes)


@pytest.mark.parametrize("key", [STRING, "org.apache.kafka.connect.converters.ByteArrayConverter"])
def test_a_text_or_bytes_key_sets_nothing(key: str) -> None:
    result = sink(ELASTIC_SINK, value_converter=JSON, key_converter=key, key_converter_schemas_enable="true")
    assert result.warnings == [] and not {"sink.key_format", "sink.key_schemas_enable"} & result.values.keys()


def test_a_json_key_is_read_as_json_where_pk_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"connector.class": ES, "connect.elastic.kcql": "UPSERT INTO r SELECT * FROM t PK _key.id",
              "key.converter": JSON, "key.converter.schemas.enable": "false"}  # fmt: skip
    settings = load_env(ELASTIC_SINK.settings, translate(config).env, monkeypatch)
    assert (settings.sink.key_format, settings.sink.key_schemas_enable) == ("json", False)


@pytest.mark.parametrize("connector", [ELASTIC_SINK, CASSANDRA_SINK, HAZELCAST_SINK], ids=lambda c: c.service)
@pytest.mark.parametrize("avro", [AVRO, "io.apicurio.registry.utils.converter.AvroConverter"])
def test_pk_key_reads_an_avro_key_through_the_registry(
    connector: Connector, avro: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, _ = KCQL[connector.service]
    kcql = "UPSERT INTO r SELECT * FROM t PK _key" + (" STOREAS IMAP" if connector is HAZELCAST_SINK else "")
    config = {"connector.class": connector.classes[-1], key: kcql, "key.converter": avro,
              "value.converter": JSON, "key.converter.schema.registry.url": "http://registry:8081",
              "connect.cassandra.key.space": "k"}  # fmt: skip
    if connector is not CASSANDRA_SINK:
        config.pop("connect.cassandra.key.space")
    result = translate(config)
    settings = load_env(connector.settings, result.env, monkeypatch)
    assert (settings.sink.key_format, settings.sink.value_format) == ("avro", "json")
    assert result.env[f"{connector.prefix}REGISTRY__URL"] == "http://registry:8081"


def test_the_values_registry_wins_over_the_keys() -> None:
    result = sink(ELASTIC_SINK, key_converter=AVRO, key_converter_schema_registry_url="http://keys:8081",
                  value_converter_schema_registry_url="http://values:8081")  # fmt: skip
    assert result.values["registry.url"] == "http://values:8081"


def test_string_values_are_json_text(monkeypatch: pytest.MonkeyPatch) -> None:
    result = sink(CASSANDRA_SINK, value_converter=STRING, value_converter_schemas_enable="true")
    settings = load_env(CASSANDRA_SINK.settings, result.env, monkeypatch)
    assert settings.sink.value_format == "string" and "sink.value_schemas_enable" not in result.values


def test_byte_array_values_are_refused_naming_what_reads_json() -> None:
    value = "org.apache.kafka.connect.converters.ByteArrayConverter"
    with pytest.raises(ConnectError) as raised:
        sink(ELASTIC_SINK, value_converter=value)
    assert f"value.converter={value}: a sink writes records with fields" in str(raised.value)
    assert f"value.converter={STRING}, or {JSON} and value.converter.schemas.enable=false" in str(raised.value)


def test_an_unknown_value_converter_names_the_known_ones() -> None:
    with pytest.raises(ConnectError, match=r"value.converter=org.example.X: expected io.confluent.*JsonConverter"):
        sink(ELASTIC_SINK, value_converter="org.example.X")


SOURCE_CONFIGS = {
    MQTT_SOURCE.service: {"connector.class": MQTT, "connect.mqtt.hosts": "tcp://mqtt:1883",
                          "connect.mqtt.kcql": "INSERT INTO readings SELECT * FROM sensors/+"},
    COAP_SOURCE.service: {"connector.class": COAP_SOURCE.classes[-1], "connect.coap.uri": "coap://127.0.0.1:5683",
                          "connect.coap.kcql": "INSERT INTO readings SELECT * FROM sensors"},
}  # fmt: skip
# The record each source's gateway writes (a CoAP source config always has coap-ingest write CoapMessage).
RECORDS = {MQTT_SOURCE.service: "SensorReading", COAP_SOURCE.service: "CoapMessage"}
sources = pytest.mark.parametrize("connector", [MQTT_SOURCE, COAP_SOURCE], ids=lambda c: c.service)


def source(connector: Connector, **converters: str) -> Translation:
    config = SOURCE_CONFIGS[connector.service]
    return translate(config | {name.replace("_", "."): value for name, value in converters.items()})


@sources
@pytest.mark.parametrize("side", ["value", "key"])
@pytest.mark.parametrize("schemas", ["true", "false"])
def test_a_source_writes_json_values_and_keys_with_or_without_schemas(
    connector: Connector, side: str, schemas: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = source(connector, **{f"{side}_converter": JSON, f"{side}_converter_schemas_enable": schemas})
    assert result.env[f"{connector.prefix}OUTPUT__{side.upper()}_FORMAT"] == "json"
    assert result.env[f"{connector.prefix}OUTPUT__{side.upper()}_SCHEMAS_ENABLE"] == schemas
    output = load_env(connector.settings, result.env, monkeypatch).output
    assert (getattr(output, f"{side}_format"), getattr(output, f"{side}_schemas_enable")) == ("json", schemas == "true")
    assert output.uses_registry is (side == "key")  # JSON keys beside Avro values (the default) still need it


@sources
@pytest.mark.parametrize("side", ["value", "key"])
def test_a_source_writes_the_envelope_unless_told_not_to(
    connector: Connector, side: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = load_env(connector.settings, source(connector, **{f"{side}_converter": JSON}).env, monkeypatch).output
    assert getattr(output, f"{side}_format") == "json"
    assert getattr(output, f"{side}_schemas_enable") is True  # JsonConverter's default


@sources
def test_a_source_writes_string_values_as_json_text(connector: Connector, monkeypatch: pytest.MonkeyPatch) -> None:
    result = source(connector, value_converter=STRING, value_converter_schemas_enable="true")
    assert "output.value_schemas_enable" not in result.values
    assert "value.converter.schemas.enable: nothing to set: JsonConverter's, not value.converter" in result.notes
    assert load_env(connector.settings, result.env, monkeypatch).output.value_format == "string"


@sources
@pytest.mark.parametrize("avro", [AVRO, "io.apicurio.registry.utils.converter.AvroConverter"])
def test_a_source_writes_avro_by_default_and_with_avro(
    connector: Connector, avro: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for result in (source(connector), source(connector, value_converter=avro, value_converter_schemas_enable="false")):
        assert not {"output.value_format", "output.value_schemas_enable"} & result.values.keys()
        assert load_env(connector.settings, result.env, monkeypatch).output.value_format == "avro"


@sources
def test_a_source_refuses_byte_array_values_naming_what_writes_json(connector: Connector) -> None:
    value = "org.apache.kafka.connect.converters.ByteArrayConverter"
    with pytest.raises(ConnectError) as raised:
        source(connector, value_converter=value)
    said = str(raised.value)
    assert (
        f"value.converter={value}: {connector.service} writes records with fields ({RECORDS[connector.service]}" in said
    )
    assert f"value.converter={JSON} and value.converter.schemas.enable=false" in said
    assert f"or {STRING}" in said


@sources
@pytest.mark.parametrize(
    ("side", "known"), [("value", r"io.confluent.*JsonConverter"), ("key", r".*StringConverter or .*JsonConverter")]
)
def test_a_source_names_the_converters_it_knows(connector: Connector, side: str, known: str) -> None:
    with pytest.raises(ConnectError, match=rf"{side}.converter=org.example.X: expected {known}"):
        source(connector, **{f"{side}_converter": "org.example.X"})


@pytest.mark.parametrize(
    "key",
    ["value.converter", "value.converter.schemas.enable", "key.converter", "key.converter.schemas.enable",
     "key.converter.schema.registry.url"],
)  # fmt: skip
def test_both_sources_share_one_converter_rule(key: str) -> None:
    """The CoAP source maps the converters as the MQTT source does: the same rule, documented alike."""
    mqtt, coap = MQTT_SOURCE.rules[key], COAP_SOURCE.rules[key]
    assert isinstance(mqtt, Setting) and isinstance(coap, Setting)
    assert (mqtt.fields, mqtt.describe()) == (coap.fields, coap.describe())


def test_the_coap_source_keeps_writing_stream_reactors_record(monkeypatch: pytest.MonkeyPatch) -> None:
    result = source(COAP_SOURCE, value_converter=JSON, value_converter_schemas_enable="false")
    settings = load_env(COAP_SOURCE.settings, result.env, monkeypatch)
    assert (settings.output_format, settings.output.value_format) == ("coap-message", "json")


@sources
@pytest.mark.parametrize("key", [STRING, "org.apache.kafka.connect.converters.ByteArrayConverter", None])
def test_a_source_writes_text_keys_by_default_and_for_string_or_bytes(
    connector: Connector, key: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = source(connector, key_converter_schemas_enable="true", **({"key_converter": key} if key else {}))
    assert not {"output.key_format", "output.key_schemas_enable"} & result.values.keys()
    assert "key.converter.schemas.enable: nothing to set: JsonConverter's, not key.converter" in result.notes
    assert load_env(connector.settings, result.env, monkeypatch).output.key_format == "string"


@sources
@pytest.mark.parametrize("avro", [AVRO, "io.apicurio.registry.utils.converter.AvroConverter"])
def test_a_source_writes_avro_keys_through_the_registry(
    connector: Connector, avro: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = source(connector, key_converter=avro, value_converter=JSON,
                    key_converter_schema_registry_url="http://registry:8081")  # fmt: skip
    output = load_env(connector.settings, result.env, monkeypatch).output
    assert (output.key_format, output.value_format, output.uses_registry) == ("avro", "json", True)
    assert result.env[f"{connector.prefix}REGISTRY__URL"] == "http://registry:8081"


@pytest.mark.parametrize(
    ("converter", "header_format"),
    [(STRING, "string"), (JSON, "json"), ("org.apache.kafka.connect.converters.ByteArrayConverter", "bytearray"),
     ("org.apache.kafka.connect.converters.LongConverter", "long"),
     ("org.apache.kafka.connect.converters.IntegerConverter", "integer"),
     ("org.apache.kafka.connect.converters.ShortConverter", "short"),
     ("org.apache.kafka.connect.converters.FloatConverter", "float"),
     ("org.apache.kafka.connect.converters.DoubleConverter", "double"),
     ("org.apache.kafka.connect.converters.BooleanConverter", "boolean")],
)  # fmt: skip
@pytest.mark.parametrize("connector", [ELASTIC_SINK, CASSANDRA_SINK, HAZELCAST_SINK], ids=lambda c: c.service)
def test_a_header_converter_is_the_header_format_on_every_sink(
    connector: Connector, converter: str, header_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = sink(connector, header_converter=converter)
    settings = load_env(connector.settings, result.env, monkeypatch)
    assert settings.sink.header_format == header_format


def test_json_headers_read_the_envelope_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    # Plugins.newHeaderConverter configures it with the worker's header.converter.* keys (its own
    # schemas.enable, JsonConverterConfig's default true), apart from the value converter's.
    default = load_env(ELASTIC_SINK.settings, sink(ELASTIC_SINK, header_converter=JSON).env, monkeypatch)
    assert (default.sink.header_format, default.sink.header_schemas_enable) == ("json", True)
    bare = sink(ELASTIC_SINK, header_converter=JSON, header_converter_schemas_enable="false",
                value_converter=JSON, value_converter_schemas_enable="true")  # fmt: skip
    assert (bare.values["sink.header_schemas_enable"], bare.values["sink.value_schemas_enable"]) == ("false", "true")


def test_header_schemas_enable_sets_nothing_for_another_header_converter() -> None:
    result = sink(HAZELCAST_SINK, header_converter=STRING, header_converter_schemas_enable="false")
    assert "sink.header_schemas_enable" not in result.values
    assert any(n.startswith("header.converter.schemas.enable: nothing to set") for n in result.notes)
