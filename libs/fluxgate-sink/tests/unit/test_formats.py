"""Record values as Kafka Connect's JsonConverter reads them: with the schema envelope, bare, and
what does not decode (every such error is a SerializationError: the record is dead-lettered)."""

from __future__ import annotations

import json
from base64 import b64encode
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from fluxgate_testing import connect_json
from fluxgate_testing.connect_json import TIMESTAMP, field, struct

from fluxgate_core.errors import SerializationError
from fluxgate_core.serde import AvroDecoder
from fluxgate_core.settings import RegistrySettings
from fluxgate_sink.formats import ConnectJsonDecoder, json_first, key_reader, value_decoder
from fluxgate_sink.settings import SinkSettings

READING_SCHEMA = struct(
    "reading",
    field("device_id", "string"),
    field("count", "int64"),
    field("mean", "double", optional=True),
    field("unit", "string", optional=True, default="C"),
    field("at", "int64", name=TIMESTAMP, version=1),
    field("tags", "array", optional=True, items={"type": "string"}),
    field("site", "struct", optional=True, fields=[field("room", "int32")]),
)
READING = {"device_id": "dev-1", "count": 3, "mean": 21.5, "at": 1795435200000, "tags": ["a"], "site": {"room": 4}}


def envelope(payload: Any, schema: Any = READING_SCHEMA) -> bytes:
    return connect_json.envelope(payload, schema)


def reason(decoder: ConnectJsonDecoder, data: bytes) -> str:
    with pytest.raises(SerializationError) as raised:
        decoder.decode(data)
    assert not raised.value.retriable  # dead-lettered, never read again
    return str(raised.value)


def test_an_envelope_is_read_through_its_schema() -> None:
    decoded = ConnectJsonDecoder(schemas_enable=True).decode(envelope(READING))
    assert decoded == {
        "device_id": "dev-1",
        "count": 3,
        "mean": 21.5,
        "unit": "C",  # absent: the schema's default
        "at": datetime(2026, 11, 23, 12, 0, tzinfo=UTC),  # a Timestamp: what the Avro decoder gives
        "tags": ["a"],
        "site": {"room": 4},
    }
    assert decoded["at"].tzinfo is UTC  # the router takes a UTC datetime as the event time as it is


def test_optional_fields_may_be_null_or_absent() -> None:
    reading = {"device_id": "dev-1", "count": 3, "mean": None, "at": 0}
    decoded = ConnectJsonDecoder().decode(envelope(reading))
    assert decoded["mean"] is None and decoded["tags"] is None and decoded["site"] is None


def test_an_integral_float64_is_a_float_and_extra_payload_fields_are_dropped() -> None:
    decoded = ConnectJsonDecoder().decode(envelope({**READING, "mean": 21, "extra": 1}))
    assert decoded["mean"] == 21.0 and type(decoded["mean"]) is float
    assert "extra" not in decoded


def test_logical_types_date_time_and_decimal() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date"},
            {"field": "at", "type": "int32", "name": "org.apache.kafka.connect.data.Time"},
            {
                "field": "price",
                "type": "bytes",
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2"},
            },
            {"field": "raw", "type": "bytes"},
            {"field": "counts", "type": "map", "keys": {"type": "string"}, "values": {"type": "int32"}},
        ],
    }
    price = b64encode((-12345).to_bytes(2, "big", signed=True)).decode()
    payload = {"day": 20415, "at": 3_723_004, "price": price, "raw": "AAE=", "counts": {"a": 1}}
    decoded = ConnectJsonDecoder().decode(envelope(payload, schema))
    assert decoded == {
        "day": date(2025, 11, 23),
        "at": time(1, 2, 3, 4000),
        "price": Decimal("-123.45"),
        "raw": b"\x00\x01",
        "counts": {"a": 1},
    }


def test_an_envelope_without_a_schema_holds_the_payload_as_it_is() -> None:
    assert ConnectJsonDecoder().decode(envelope({"a": 1}, schema=None)) == {"a": 1}


def test_bare_json_without_schemas() -> None:
    decoder = ConnectJsonDecoder(schemas_enable=False)
    assert decoder.decode(b'{"device_id": "dev-1", "mean": 21.5, "count": 3, "nested": {"x": [1, 2.5]}}') == {
        "device_id": "dev-1",
        "mean": 21.5,
        "count": 3,
        "nested": {"x": [1, 2.5]},
    }
    # Without schemas an envelope is just an object of two fields, as JsonConverter reads it.
    assert decoder.decode(envelope({"a": 1}, None)) == {"schema": None, "payload": {"a": 1}}


def test_string_values_are_json_text_read_as_java_decodes_utf8() -> None:
    decoder = value_decoder("string", True, RegistrySettings())  # schemas.enable is JsonConverter's: not read
    assert isinstance(decoder, ConnectJsonDecoder)
    assert decoder.decode(b'{"device_id": "dev-\xff", "n": 1}') == {"device_id": "dev-\ufffd", "n": 1}
    assert reason(decoder, b"21.5").startswith("the value is a number, not an object")


def test_a_sink_that_stores_the_text_whole_takes_any_text_and_routes_by_an_objects_fields() -> None:
    """Stream-Reactor's Hazelcast sink stores StringConverter text as it is, JSON or not."""
    decoder = value_decoder("string", False, RegistrySettings(), whole_text=True)
    assert decoder.decode(b'{"device_id": "dev-1", "n": 1}') == {"device_id": "dev-1", "n": 1}
    for text in (b"hello", b"21.5", b"[1, 2]", b'"quoted"', b"{broken", b"\xff"):
        assert decoder.decode(text) == {}, text  # no fields: a PK finds none, the text is stored all the same
    assert reason(decoder, b"") == "the value is null (a tombstone or an empty value): there is no text to store"


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_malformed_json_does_not_decode(schemas_enable: bool) -> None:
    assert reason(ConnectJsonDecoder(schemas_enable), b'{"device_id": "dev-1",').startswith("not JSON: ")
    assert reason(ConnectJsonDecoder(schemas_enable), b"\xff\xfe{}").startswith("not JSON: ")
    assert "not JSON" in reason(ConnectJsonDecoder(schemas_enable), b'{"mean": NaN}')


def test_a_bare_value_when_schemas_are_enabled_names_the_setting() -> None:
    said = reason(ConnectJsonDecoder(schemas_enable=True), json.dumps(READING).encode())
    assert '"schema" and "payload"' in said and "schemas.enable to false" in said
    assert "device_id" in said  # the keys it found


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({**READING, "count": "3"}, "payload.count: expected int64, got a string"),
        ({**READING, "count": None}, "payload.count: null for a required int64 field"),
        ({key: value for key, value in READING.items() if key != "device_id"}, "payload.device_id: null"),
        ({**READING, "count": 2**63}, "payload.count: expected int64"),
        ({**READING, "site": {"room": 2.5}}, "payload.site.room: expected int32, got a number"),
        ({**READING, "tags": [1]}, "payload.tags[0]: expected string"),
        ([1, 2], "payload: expected struct, got an array"),
    ],
)
def test_a_payload_that_does_not_match_its_schema_says_where(payload: Any, expected: str) -> None:
    assert reason(ConnectJsonDecoder(), envelope(payload)).startswith(expected)


@pytest.mark.parametrize("data", [b"", b"null", b"42", b'"text"', b"[1]"])
def test_a_value_that_is_not_an_object_does_not_decode(data: bytes) -> None:
    assert "not an object" in reason(ConnectJsonDecoder(schemas_enable=False), data)


def test_an_unknown_schema_type_does_not_decode() -> None:
    assert "unknown schema type 'uuid'" in reason(ConnectJsonDecoder(), envelope("x", {"type": "uuid"}))


def test_the_settings_choose_the_decoder() -> None:
    settings = SinkSettings(kcql="INSERT INTO t SELECT * FROM a", value_format="json", value_schemas_enable=False)
    decoder = value_decoder(settings.value_format, settings.value_schemas_enable, RegistrySettings())
    assert isinstance(decoder, ConnectJsonDecoder) and not decoder.schemas_enable
    assert isinstance(value_decoder("avro", True, RegistrySettings()), AvroDecoder)  # the default: our pipeline's
    assert SinkSettings(kcql="INSERT INTO t SELECT * FROM a").value_format == "avro"


# Where Python's json and Kafka Connect's JsonConverter (JsonDeserializer, Jackson 2.21 as Kafka 4.4
# ships it) could read the same bytes apart. Each expectation is what Connect does.


@pytest.mark.parametrize("schemas_enable", [True, False])
@pytest.mark.parametrize("tail", [b" x", b" }", b"\x00", b'{"b":2}', b" 1 2"])
def test_what_follows_the_first_value_is_ignored_as_jackson_does(schemas_enable: bool, tail: bool) -> None:
    body = envelope({"a": 1}, None) if schemas_enable else b'{"a":1}'
    assert ConnectJsonDecoder(schemas_enable).decode(body + tail) == {"a": 1}


def test_trailing_tokens_after_a_bare_number_and_in_json_text() -> None:
    assert ConnectJsonDecoder(schemas_enable=False).read(b"1 2") == 1
    assert value_decoder("string", False, RegistrySettings()).decode(b'{"a":1} trailing') == {"a": 1}


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_not_json(literal: bytes) -> None:
    assert reason(ConnectJsonDecoder(schemas_enable=False), b'{"a":' + literal + b"}").startswith("not JSON")


def test_a_duplicate_key_keeps_the_last_value() -> None:
    assert ConnectJsonDecoder(schemas_enable=False).decode(b'{"a":1,"b":0,"a":2}') == {"a": 2, "b": 0}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"a":007}', 7),
        (b'{"a":-007.5}', -7.5),
        (b'{"a":00}', 0),
        (b'{"a":[01, 1.007, 1e007, "007"]}', [1, 1.007, 1e7, "007"]),
    ],
)
def test_leading_zeros_are_read_as_kafka_connect_reads_them(data: bytes, expected: Any) -> None:
    assert ConnectJsonDecoder(schemas_enable=False).decode(data)["a"] == expected


def test_leading_zeros_in_an_envelope_and_with_trailing_tokens() -> None:
    body = envelope({"device_id": "d", "count": 1, "at": 0}).replace(b'"count": 1', b'"count": 0001')
    assert ConnectJsonDecoder().decode(body + b" x")["count"] == 1


def test_json_text_keeps_leading_zeros_refused() -> None:
    # StringConverter's text is parsed by the sink (Stream-Reactor), not by JsonDeserializer.
    assert reason(value_decoder("string", False, RegistrySettings()), b'{"a":007}').startswith("not JSON")


def test_numbers_keep_their_types_without_schemas() -> None:
    decoded = ConnectJsonDecoder(schemas_enable=False).decode(b'{"i":12345678901234567890,"f":0.1,"e":1e400}')
    # Connect would wrap the integer to an int64 (BigInteger.longValue): we keep it exact, on purpose.
    assert decoded == {"i": 12345678901234567890, "f": 0.1, "e": float("inf")}
    assert type(decoded["f"]) is float


def test_a_numeric_decimal_keeps_every_digit() -> None:
    schema = struct(
        "priced",
        field("price", "bytes", name="org.apache.kafka.connect.data.Decimal", parameters={"scale": "9"}),
        field("mean", "double"),
        field("n", "int64"),
    )
    body = envelope({"price": 0, "mean": 0.1, "n": 1}, schema).replace(
        b'"price": 0', b'"price": 12345678901234567890.123456789'
    )
    decoded = ConnectJsonDecoder().decode(body)
    assert decoded == {"price": Decimal("12345678901234567890.123456789"), "mean": 0.1, "n": 1}
    assert type(decoded["mean"]) is float


def test_a_numeric_decimal_in_a_payload_without_a_schema_is_a_float() -> None:
    body = b'{"schema":null,"payload":{"x":1.5,"name":"org.apache.kafka.connect.data.Decimal"}}'
    decoded = ConnectJsonDecoder().decode(body)
    assert decoded["x"] == 1.5 and type(decoded["x"]) is float


def test_a_utf8_bom_is_skipped_and_utf16_is_read_as_jackson_detects_it() -> None:
    decoder = ConnectJsonDecoder(schemas_enable=False)
    assert decoder.decode(b'\xef\xbb\xbf{"a":1}') == {"a": 1}
    assert decoder.decode('{"a":"é"}'.encode("utf-16-le")) == {"a": "é"}
    # StringConverter's text keeps the BOM as U+FEFF, which Jackson's text parser refuses too.
    assert reason(value_decoder("string", False, RegistrySettings()), b'\xef\xbb\xbf{"a":1}').startswith("not JSON")


@pytest.mark.parametrize("data", [b"", b" \n\t\r"])
def test_no_json_value_is_null_without_schemas_and_no_envelope_with(data: bytes) -> None:
    assert ConnectJsonDecoder(schemas_enable=False).read(data) is None  # Jackson's MissingNode: a null
    with pytest.raises(SerializationError, match='"schema" and "payload"'):
        ConnectJsonDecoder(schemas_enable=True).read(data)
    assert "null (a tombstone or an empty value)" in reason(ConnectJsonDecoder(schemas_enable=False), data)


def test_an_empty_value_is_a_tombstone_whatever_schemas_enable_says() -> None:
    # The consumer hands a tombstone over as b"", so decode cannot tell the two apart.
    assert "null (a tombstone or an empty value)" in reason(ConnectJsonDecoder(), b"")


def test_a_json_null_is_a_null_value() -> None:
    assert ConnectJsonDecoder(schemas_enable=False).read(b"null") is None
    assert ConnectJsonDecoder().read(envelope(None, None)) is None
    assert '"schema" and "payload"' in reason(ConnectJsonDecoder(), b"null")


def test_bytes_that_are_not_utf8_do_not_decode() -> None:
    assert "can't decode byte 0xff" in reason(ConnectJsonDecoder(schemas_enable=False), b'{"s":"\xff"}')


@pytest.mark.parametrize("schemas_enable", [True, False])
@pytest.mark.parametrize("depth", [1001, 100_000])
def test_deep_nesting_is_dead_lettered_never_a_crash(schemas_enable: bool, depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    body = b'{"schema":null,"payload":' + nested + b"}" if schemas_enable else nested
    with pytest.raises(SerializationError, match="nested too deep") as raised:
        ConnectJsonDecoder(schemas_enable).read(body)
    assert not raised.value.retriable


def test_nesting_well_within_the_limit_is_read() -> None:
    nested = b"[" * 200 + b"]" * 200
    assert ConnectJsonDecoder(schemas_enable=False).read(nested) is not None


@pytest.mark.parametrize(
    ("schema_type", "low", "high"),
    [
        ("int8", -128, 127),
        ("int16", -32_768, 32_767),
        ("int32", -2_147_483_648, 2_147_483_647),
        ("int64", -9_223_372_036_854_775_808, 9_223_372_036_854_775_807),
    ],
)
def test_each_connect_integer_type_reads_its_bounds_and_refuses_one_past(schema_type: str, low: int, high: int) -> None:
    # Java's byte, short, int and long, written out rather than taken from CONNECT_INTEGER_RANGES so a
    # changed bound fails here: one past either bound would be wrapped by Connect.
    schema = struct("r", field("x", schema_type))
    for bound in (low, high):
        assert ConnectJsonDecoder().decode(envelope({"x": bound}, schema)) == {"x": bound}
    for past in (low - 1, high + 1):
        assert (
            reason(ConnectJsonDecoder(), envelope({"x": past}, schema))
            == f"payload.x: expected {schema_type}, got a number"
        )


@pytest.mark.parametrize(
    ("payload", "schema_type"),
    [(2.0, "int64"), (2**31, "int32"), ("3", "int64"), ("true", "boolean"), (300, "int8")],
)
def test_a_value_connect_would_coerce_is_dead_lettered_on_purpose(payload: Any, schema_type: str) -> None:
    # JsonConverter takes intValue()/longValue()/booleanValue() of whatever node it finds: 2.0 is 2,
    # 2**31 wraps to -2147483648, "3" is 0, "true" is false. We dead-letter instead of guessing.
    schema = struct("r", field("x", schema_type))
    assert reason(ConnectJsonDecoder(), envelope({"x": payload}, schema)).startswith(
        f"payload.x: expected {schema_type}"
    )


def test_a_json_key_of_no_value_is_refused_with_schemas_as_connect_does() -> None:
    read = key_reader("json", schemas_enable=True)
    assert read(None) is None  # a null key
    with pytest.raises(SerializationError):
        read(b"")
    assert key_reader("json", schemas_enable=False)(b"") is None


def test_a_bare_number_with_leading_zeros_is_one_value_never_zero_and_extra_data() -> None:
    assert key_reader("json", schemas_enable=False)(b"007") == 7
    assert key_reader("json", schemas_enable=False)(b"-007 8") == -7
    with pytest.raises(SerializationError, match="not JSON"):  # Jackson's default: leading zeros refused
        value_decoder("string", False, RegistrySettings()).read(b"007")


def test_nesting_too_deep_for_its_schema_is_dead_lettered() -> None:
    depth = 400  # Jackson reads it; converting it through the schema takes Python past its recursion limit
    schema: dict[str, Any] = {"type": "int32"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    body = json.dumps({"schema": struct("deep", {**schema, "field": "x"}), "payload": {"x": [[0]]}}).encode()
    said = reason(ConnectJsonDecoder(), body.replace(b"[[0]]", b"[" * depth + b"]" * depth))
    assert said == "payload: nested too deep to read through its schema"


def test_a_string_key_nested_too_deep_to_parse_stays_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # Stream-Reactor's parse fails past Jackson's 1000 levels: TextNode
    assert json_first(deep) == deep


def test_stringconverter_text_is_read_as_stream_reactors_default_jackson_mapper_reads_a_string() -> None:
    # Checked against lensesio/stream-reactor: kafka-connect-sql-common's io/lenses/json/sql/JacksonJson.scala
    # (JsonMapper.builder() with no read feature changed; asJson is readTree(String)), which the
    # Elastic sinks' JsonPayloadExtractor.scala and ToJsonWithProjections.scala (the older Cassandra
    # sink's CassandraJsonWriter.scala) parse a STRING value with: the last duplicate key wins,
    # non-integral numbers are doubles (USE_BIG_DECIMAL_FOR_FLOATS off), integers of any length exact.
    decoder = value_decoder("string", False, RegistrySettings())
    decoded = decoder.decode(b'{"a": 1, "a": 2, "x": 0.1, "big": 123456789012345678901234567890}')
    assert decoded == {"a": 2, "x": 0.1, "big": 123456789012345678901234567890}
    assert type(decoded["x"]) is float
    assert reason(decoder, b'{"t": NaN}').startswith("not JSON")  # ALLOW_NON_NUMERIC_NUMBERS off
    assert reason(decoder, b"sensor-7 online").startswith("not JSON")  # Elastic: a TextNode ES refuses
