"""A SensorReading as Kafka Connect's JsonConverter writes it (the envelope, the bare payload) and
as our StringConverter text; the Connect schema of every type our schemas use; the output setting."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fluxgate_testing import CONNECT_TIMESTAMP, SENSOR_READING_CONNECT_SCHEMA
from pydantic import ValidationError

from fluxgate_core.errors import SerializationError
from fluxgate_core.json_records import (
    ConnectJsonEncoder,
    ConnectStringEncoder,
    OutputSettings,
    connect_encoder,
    connect_schema,
)
from fluxgate_core.schemas import SENSOR_READING, schema_dict

READING: dict[str, Any] = {
    "device_id": "dev-1",
    "metric": "temperature",
    "value": 21,
    "unit": None,
    "event_time": 1_764_201_600_000,
    "ingest_time": 1_764_201_600_123,
    "source_protocol": "MQTT",
    "source": "sensors/dev-1/temperature",
    "sequence": None,
    "attributes": {"site": "läb"},
}
PAYLOAD = {**READING, "value": 21.0}


def encoder(schemas_enable: bool = True) -> ConnectJsonEncoder:
    return ConnectJsonEncoder(schema_dict(SENSOR_READING), schemas_enable)


def test_the_envelope_holds_the_connect_schema_and_the_payload() -> None:
    data = encoder().encode(READING)
    assert json.loads(data) == {"schema": SENSOR_READING_CONNECT_SCHEMA, "payload": PAYLOAD}
    assert data.startswith(b'{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"d')
    # Compact, keys in JsonConverter's order, a float64 as a double, non-ASCII as UTF-8.
    assert b' "' not in data and b'"value":21.0,' in data and "läb".encode() in data


def test_timestamps_are_epoch_millis_int64_and_optional_fields_null() -> None:
    payload = json.loads(encoder().encode(READING))["payload"]
    assert payload["event_time"] == 1_764_201_600_000 and type(payload["event_time"]) is int
    assert payload["unit"] is None and payload["sequence"] is None
    event_time = next(
        f for f in json.loads(encoder().encode(READING))["schema"]["fields"] if f["field"] == "event_time"
    )
    assert event_time == {**CONNECT_TIMESTAMP, "field": "event_time"}


def test_without_schemas_the_value_is_the_bare_payload() -> None:
    data = encoder(schemas_enable=False).encode({**READING, "sequence": 42, "unit": "Cel"})
    assert json.loads(data) == {**PAYLOAD, "sequence": 42, "unit": "Cel"}
    assert data.startswith(b'{"device_id":"dev-1","metric":"temperature","value":21.0,"unit":"Cel",')


def test_string_is_the_records_json_text() -> None:
    assert ConnectStringEncoder(schema_dict(SENSOR_READING)).encode(READING) == encoder(False).encode(READING)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"device_id": None}, "null for a required string"),
        ({"value": float("nan")}, "not JSON Kafka Connect can write"),
        ({"value": "warm"}, "expected a number"),
        ({"sequence": 1.5}, "expected an integer"),
        ({"attributes": {"k": 1}}, "expected a string"),
        ({"source": "\ud800"}, "not JSON Kafka Connect can write"),
    ],
)
def test_a_record_that_does_not_fit_is_a_serialization_error(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(SerializationError, match=reason):
        encoder().encode({**READING, **change})


def test_a_missing_required_field_is_a_serialization_error() -> None:
    record = dict(READING)
    del record["metric"]
    with pytest.raises(SerializationError, match="null for a required string"):
        encoder().encode(record)


def test_every_avro_type_our_schemas_use_has_its_connect_type() -> None:
    avro = {
        "type": "record",
        "name": "R",
        "namespace": "n",
        "fields": [
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": ["null", "int"], "default": None},
            {"name": "f", "type": "float"},
            {"name": "y", "type": "bytes", "default": ""},
            {"name": "a", "type": {"type": "array", "items": ["null", "string"]}, "default": []},
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        ],
    }
    schema = connect_schema(avro)
    assert schema["name"] == "n.R"
    assert schema["fields"] == [
        {"type": "boolean", "optional": False, "field": "b"},
        {"type": "int32", "optional": True, "field": "i"},
        {"type": "float32", "optional": False, "field": "f"},
        {"type": "bytes", "optional": False, "default": "", "field": "y"},
        {
            "type": "array",
            "items": {"type": "string", "optional": True},
            "optional": False,
            "default": [],
            "field": "a",
        },
        {"type": "int32", "optional": False, "name": "org.apache.kafka.connect.data.Date", "version": 1, "field": "d"},
    ]
    record = {"b": True, "i": None, "f": 1, "y": b"\x00\xff", "a": ["x", None], "d": 19_000}
    assert json.loads(ConnectJsonEncoder(avro, False).encode(record)) == {**record, "f": 1.0, "y": "AP8="}


@pytest.mark.parametrize(
    "avro_type",
    [["null", "string", "long"], {"type": "long", "logicalType": "timestamp-micros"}, {"type": "fixed", "size": 2}],
)
def test_a_type_without_a_connect_mapping_fails_when_built(avro_type: Any) -> None:
    with pytest.raises(ValueError, match="Connect"):
        connect_schema({"type": "record", "name": "R", "fields": [{"name": "x", "type": avro_type}]})


def test_the_output_setting_chooses_the_encoder() -> None:
    assert OutputSettings().uses_registry and OutputSettings().value_format == "avro"
    json_output = OutputSettings(value_format="json", value_schemas_enable=False)
    built = connect_encoder(json_output, schema_dict(SENSOR_READING))
    assert isinstance(built, ConnectJsonEncoder) and not built.schemas_enable and not json_output.uses_registry
    assert isinstance(connect_encoder(OutputSettings(value_format="string"), schema_dict(SENSOR_READING)),
                      ConnectStringEncoder)  # fmt: skip
    with pytest.raises(ValueError, match="registry"):
        connect_encoder(OutputSettings(), schema_dict(SENSOR_READING))
    with pytest.raises(ValidationError, match="value_format"):
        OutputSettings(value_format="bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"event_time": 2**63}, "out of range for a Connect int64"),
        ({"event_time": -(2**63) - 1}, "out of range for a Connect int64"),
        ({"value": float("inf")}, "not JSON Kafka Connect can write"),
    ],
)
def test_what_connect_would_read_back_otherwise_is_a_serialization_error(change: dict[str, Any], reason: str) -> None:
    # JsonConverter reads 2**63 in an int64 as longValue(), wrapped; Jackson writes an infinity as the
    # string "Infinity", read back as 0.0.
    with pytest.raises(SerializationError, match=reason):
        encoder().encode({**READING, **change})


@pytest.mark.parametrize(
    ("avro_type", "connect_type", "low", "high"),
    [
        ("int", "int32", -2_147_483_648, 2_147_483_647),
        ("long", "int64", -9_223_372_036_854_775_808, 9_223_372_036_854_775_807),
    ],
)
def test_each_connect_integer_type_writes_its_bounds_and_refuses_one_past(
    avro_type: str, connect_type: str, low: int, high: int
) -> None:
    # Java's int and long, written out rather than taken from CONNECT_INTEGER_RANGES so a changed
    # bound fails here: one past either bound would be read back wrapped.
    schema = {"type": "record", "name": "R", "fields": [{"name": "n", "type": avro_type}]}
    for bound in (low, high):
        assert ConnectJsonEncoder(schema, schemas_enable=False).encode({"n": bound}) == b'{"n":%d}' % bound
    for past in (low - 1, high + 1):
        with pytest.raises(SerializationError, match=f"^{past} is out of range for a Connect {connect_type}$"):
            ConnectJsonEncoder(schema).encode({"n": past})
