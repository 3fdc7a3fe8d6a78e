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
from fluxgate_sink.formats import ConnectJsonDecoder, value_decoder
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
