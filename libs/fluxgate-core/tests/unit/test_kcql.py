"""The one KCQL grammar, as the sources read it (the sinks' reading: libs/fluxgate-sink/tests/unit/test_kcql.py)."""

from __future__ import annotations

import pytest

from fluxgate_core.kcql import (
    COAP_SOURCE,
    MQTT_SOURCE,
    SINK,
    Dialect,
    KcqlError,
    SourceStatement,
    parse_sources,
    parse_statements,
)

NEW = "io.lenses.streamreactor.connect.converters.source"
OLD = "com.datamountaineer.streamreactor.connect.converters.source"


def error(text: str, dialect: Dialect = MQTT_SOURCE) -> str:
    with pytest.raises(KcqlError) as caught:
        parse_sources(text, dialect) if dialect.source else parse_statements(text, dialect)
    return str(caught.value)


def test_mqtt_filters_wildcards_and_shared_subscriptions_are_source_entities() -> None:
    text = (
        "INSERT INTO readings SELECT * FROM /mqttTopicA/+/sensors;\n"
        "insert into all_of_it select * from devices/#;\n"
        "INSERT INTO shared SELECT * FROM '$share/fluxgate/plant/+/temp';\n"
        "INSERT INTO quoted SELECT * FROM `site one/+`"
    )
    statements = parse_sources(text, MQTT_SOURCE)
    assert [(s.target, s.sources) for s in statements] == [
        ("readings", ("/mqttTopicA/+/sensors",)),
        ("all_of_it", ("devices/#",)),
        ("shared", ("$share/fluxgate/plant/+/temp",)),
        ("quoted", ("site one/+",)),
    ]
    assert statements[0] == SourceStatement("INSERT INTO readings SELECT * FROM /mqttTopicA/+/sensors",
                                            "readings", ("/mqttTopicA/+/sensors",))  # fmt: skip


@pytest.mark.parametrize("target", ["$", "`$`", "'$'"])
def test_dollar_is_the_dynamic_target_bare_or_quoted(target: str) -> None:
    (statement,) = parse_sources(f"INSERT INTO {target} SELECT * FROM device/+/variable/+", MQTT_SOURCE)
    assert statement.dynamic and statement.target == "$"


def test_withkey_with_nested_fields_and_a_delimiter() -> None:
    text = "INSERT INTO t SELECT * FROM a/+ WITHKEY(sensorId, site.building , `odd name`) KEYDELIMITER='|'"
    (statement,) = parse_sources(text, MQTT_SOURCE)
    assert statement.key_fields == (("sensorId",), ("site", "building"), ("odd name",))
    assert statement.key_delimiter == "|"


def test_withkey_delimiter_defaults_to_stream_reactors_dot() -> None:
    (statement,) = parse_sources("INSERT INTO t SELECT * FROM a WITHKEY(sensorId)", MQTT_SOURCE)
    assert statement.key_delimiter == "." and statement.key_fields == (("sensorId",),)


@pytest.mark.parametrize("package", [NEW, OLD, "com.datamountaineer.streamreactor.connect.mqtt.source.converters"])
@pytest.mark.parametrize("quote", ["`", "'", ""])
def test_json_converters_of_every_package_mean_json(package: str, quote: str) -> None:
    for name in ("JsonSimpleConverter", "JsonConverterWithSchemaEvolution", "JsonOptNullConverter"):
        text = f"INSERT INTO t SELECT * FROM a WITHCONVERTER={quote}{package}.{name}{quote}"
        (statement,) = parse_sources(text, MQTT_SOURCE)
        assert (statement.converter, statement.payload_format) == (f"{package}.{name}", "json")


def test_no_converter_means_auto() -> None:
    (statement,) = parse_sources("INSERT INTO t SELECT * FROM a", MQTT_SOURCE)
    assert (statement.converter, statement.payload_format) == (None, "auto")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("BytesConverter", "forwards the payload as opaque bytes"),
        ("JsonPassThroughConverter", "forwards the JSON text unparsed"),
        ("AvroConverter", "Avro binary under schemas from connect.converter.avro.schemas"),
        ("MyOwnConverter", "not one of Stream-Reactor's source converters"),
    ],
)
def test_converters_whose_meaning_we_do_not_have_are_refused_with_the_reason(name: str, why: str) -> None:
    text = f"INSERT INTO t SELECT * FROM a WITHCONVERTER=`{OLD}.{name}`"
    message = error(text)
    assert message.startswith(f"KCQL line 1, column 45: converter {name} is not supported: ")
    assert why in message
    assert message.endswith(f"\n    {text}\n    {' ' * 44}^")


def test_a_converter_of_another_package_is_unknown() -> None:
    message = error("INSERT INTO t SELECT * FROM a WITHCONVERTER=`com.acme.JsonSimpleConverter`")
    assert "column 45: unknown converter 'com.acme.JsonSimpleConverter'; expected one of Stream-Reactor's" in message


@pytest.mark.parametrize(
    ("clause", "column", "why"),
    [
        ("PK sensorId", 31, "PK makes no sense for the MQTT source: a source's Kafka key comes from WITHKEY"),
        ("WITHINDEXSUFFIX=-{YYYY}", 31, "WITHINDEXSUFFIX makes no sense for the MQTT source: it says how a store"),
        ("STOREAS QUEUE", 31, "STOREAS makes no sense for the MQTT source"),
        ("BATCH=5", 31, "BATCH makes no sense for the MQTT source"),
    ],
)
def test_sink_clauses_on_a_source_name_the_clause(clause: str, column: int, why: str) -> None:
    message = error(f"INSERT INTO t SELECT * FROM a {clause}")
    assert message.startswith(f"KCQL line 1, column {column}: {why}")


@pytest.mark.parametrize("clause", ["WITHCONVERTER=`x.Y`", "WITHKEY(a)", "KEYDELIMITER='-'"])
def test_source_clauses_on_a_sink_name_the_clause(clause: str) -> None:
    keyword = clause.split("=")[0].split("(")[0]
    message = error(f"INSERT INTO idx SELECT * FROM topic\n  {clause}", SINK)
    assert message.startswith(f"KCQL line 2, column 3: {keyword} makes no sense for a sink: ")


def test_the_coap_source_takes_no_clauses() -> None:
    assert "WITHCONVERTER makes no sense for the CoAP source" in error(
        "INSERT INTO t SELECT * FROM sensors WITHCONVERTER=`x.Y`", COAP_SOURCE
    )


def test_a_source_inserts_the_whole_payload() -> None:
    assert "column 1: the MQTT source only appends to Kafka: INSERT, not UPSERT" in error(
        "UPSERT INTO t SELECT * FROM a"
    )
    assert "column 22: the MQTT source takes the whole payload: SELECT *, not a field list" in error(
        "INSERT INTO t SELECT a, b FROM a"
    )


def test_several_resources_per_statement_for_coap_one_filter_for_mqtt() -> None:
    (statement,) = parse_sources("INSERT INTO coap_sensor_topic SELECT * FROM sensors, /lab/temp", COAP_SOURCE)
    assert statement.sources == ("sensors", "/lab/temp")
    assert "column 32: the MQTT source reads one source per statement" in error("INSERT INTO t SELECT * FROM a, b")
    assert "column 33: a sink reads one source per statement" in error("INSERT INTO i SELECT * FROM t1, t2", SINK)


def test_keydelimiter_needs_withkey() -> None:
    assert "column 31: KEYDELIMITER without WITHKEY" in error("INSERT INTO t SELECT * FROM a KEYDELIMITER='-'")


def test_syntax_errors_say_where_with_a_caret() -> None:
    assert error("INSERT INTO t SELECT * FROM a/+ WITHKEY sensorId") == (
        "KCQL line 1, column 41: expected '(', found 'sensorId'\n"
        "    INSERT INTO t SELECT * FROM a/+ WITHKEY sensorId\n"
        "                                            ^"
    )
    message = error("INSERT INTO t SELECT * FROM a;\nINSERT INTO u SELECT * FROM b WITHKEYS(x)")
    assert message.startswith("KCQL line 2, column 31: expected a clause (")
    assert "WITHKEY, KEYDELIMITER, WITHCONVERTER" in message and "found 'WITHKEYS'" in message


def test_a_clause_twice_is_an_error() -> None:
    assert "column 42: WITHKEY given twice" in error("INSERT INTO t SELECT * FROM a WITHKEY(x) WITHKEY(y)")
