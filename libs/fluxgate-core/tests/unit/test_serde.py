import io
import struct
from typing import Any

import fastavro
import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError
from hypothesis import given
from hypothesis import strategies as st

from fluxgate_core.errors import SerializationError
from fluxgate_core.schemas import COAP_MESSAGE, SENSOR_READING, TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_core.serde import AvroDecoder, AvroEncoder, value_subject, wire_schema_id

READING = {
    "device_id": "d1",
    "metric": "temperature",
    "value": 21.5,
    "unit": "Cel",
    "event_time": 1_700_000_000_000,
    "ingest_time": 1_700_000_000_123,
    "source_protocol": "MQTT",
    "source": "sensors/d1/temperature",
    "sequence": None,
    "attributes": {"room": "kitchen"},
}


def test_wire_format_is_magic_byte_schema_id_then_avro_body() -> None:
    encoded = AvroEncoder(schema_dict(SENSOR_READING), schema_id=42).encode(READING)
    assert encoded[0] == 0
    assert struct.unpack(">I", encoded[1:5])[0] == 42 == wire_schema_id(encoded)
    parsed = fastavro.parse_schema(schema_dict(SENSOR_READING))
    decoded = fastavro.schemaless_reader(io.BytesIO(encoded[5:]), parsed, None)
    assert decoded["device_id"] == "d1" and decoded["attributes"] == {"room": "kitchen"}
    assert int(decoded["event_time"].timestamp() * 1000) == READING["event_time"]


def test_record_that_does_not_fit_the_schema_is_a_serialization_error() -> None:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), schema_id=1)
    with pytest.raises(SerializationError, match="SensorReading"):
        encoder.encode({**READING, "value": "warm"})


@pytest.mark.parametrize(("data", "message"), [(b"\x00\x01", "too short"), (b"\x07\x00\x00\x00\x01x", "magic")])
def test_bytes_without_wire_header_are_rejected(data: bytes, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        wire_schema_id(data)


def test_every_field_of_every_contract_is_documented() -> None:
    for name in (SENSOR_READING, TEMPERATURE_AGGREGATE, COAP_MESSAGE):
        schema = schema_dict(name)
        assert schema["namespace"].startswith("io.fluxgate.")
        assert all(field.get("doc") for field in schema["fields"]), name
        fastavro.parse_schema(schema)


# Stream-Reactor's CoAP source record (its CoapMessageConverter): consumers built on it read these
# names with these types (Connect's optional INT32/INT64/STRING/BOOLEAN, etags an array of strings).
STREAM_REACTOR_COAP_FIELDS = {
    **dict.fromkeys(("message_id", "raw_code", "accept", "content_format", "observe", "uri_port"), "int"),
    **dict.fromkeys(("ingest_time", "rtt", "timestamp", "max_age"), "long"),
    **dict.fromkeys(
        (
            "is_last",
            "is_notification",
            "is_duplicate",
            "is_confirmable",
            "is_rejected",
            "is_acknowledged",
            "is_canceled",
        ),
        "boolean",
    ),
    **dict.fromkeys(
        ("type", "code", "source", "destination", "token", "block1", "block2", "location_path", "location_query"),
        "string",
    ),
    **dict.fromkeys(("proxy_uri", "size_1", "size_2", "uri_host", "uri_path", "uri_query"), "string"),
}


def test_the_coap_message_has_stream_reactors_fields_in_its_order_with_the_payload_as_bytes() -> None:
    fields = schema_dict(COAP_MESSAGE)["fields"]
    names = [field["name"] for field in fields]
    assert names[-1] == "payload" and fields[-1]["type"] == "bytes"
    assert names[names.index("content_format") + 1] == "etags"
    assert fields[names.index("etags")]["type"] == {"type": "array", "items": ["null", "string"]}
    scalar = {field["name"]: field["type"] for field in fields if field["name"] not in ("etags", "payload")}
    assert scalar == {name: ["null", avro] for name, avro in STREAM_REACTOR_COAP_FIELDS.items()}
    assert list(scalar)[:3] == ["ingest_time", "message_id", "type"]  # Stream-Reactor's order
    assert all(field["default"] is None for field in fields if isinstance(field["type"], list))


def test_topic_name_strategy() -> None:
    assert value_subject("sensors.readings") == "sensors.readings-value"


# --- the compiled writer gives fastavro's bytes, or lets fastavro decide --------------------------

_READINGS = st.fixed_dictionaries(
    {
        "device_id": st.text(),
        "metric": st.text(),
        "value": st.floats(allow_nan=True, allow_infinity=True),
        "unit": st.none() | st.text(),
        "event_time": st.integers(-(2**63), 2**63 - 1),
        "ingest_time": st.integers(-(2**63), 2**63 - 1),
        "source_protocol": st.sampled_from(["MQTT", "COAP"]),
        "source": st.text(),
        "sequence": st.none() | st.integers(-(2**63), 2**63 - 1),
        "attributes": st.dictionaries(st.text(), st.text(), max_size=4),
    }
)


@given(_READINGS)
def test_compiled_writer_matches_fastavro_byte_for_byte(reading: dict[str, Any]) -> None:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), schema_id=7)
    reference = io.BytesIO()
    fastavro.schemaless_writer(reference, fastavro.parse_schema(schema_dict(SENSOR_READING)), reading)
    assert encoder.encode(reading) == b"\x00\x00\x00\x00\x07" + reference.getvalue()


_AVRO_VALUES = {
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "boolean": st.booleans(),
    "string": st.text(),
}
_COAP_MESSAGES = st.fixed_dictionaries(
    {
        **{name: st.none() | _AVRO_VALUES[avro] for name, avro in STREAM_REACTOR_COAP_FIELDS.items()},
        "etags": st.lists(st.none() | st.text(max_size=8), max_size=4),
        "payload": st.binary(max_size=300),
    }
)


@given(_COAP_MESSAGES)
def test_compiled_writer_matches_fastavro_for_coap_messages(message: dict[str, Any]) -> None:
    encoder = AvroEncoder(schema_dict(COAP_MESSAGE), schema_id=7)
    assert encoder._compiled is not None  # ints, booleans, bytes and the array are compiled too
    reference = io.BytesIO()
    fastavro.schemaless_writer(reference, fastavro.parse_schema(schema_dict(COAP_MESSAGE)), message)
    assert encoder.encode(message) == b"\x00\x00\x00\x00\x07" + reference.getvalue()


@pytest.mark.parametrize(
    ("field", "value"),
    [("message_id", 2**31), ("is_last", 1), ("payload", "text"), ("etags", ("a",)), ("etags", [3]), ("rtt", True)],
)
def test_coap_message_values_the_compiled_writer_does_not_expect_get_fastavros_answer(field: str, value: Any) -> None:
    message = {**dict.fromkeys(STREAM_REACTOR_COAP_FIELDS), "etags": [], "payload": b"", field: value}
    encoder = AvroEncoder(schema_dict(COAP_MESSAGE), schema_id=7)
    reference = io.BytesIO()
    try:
        fastavro.schemaless_writer(reference, fastavro.parse_schema(schema_dict(COAP_MESSAGE)), message)
    except Exception as exc:
        with pytest.raises((SerializationError, type(exc))):
            encoder.encode(message)
        return
    assert encoder.encode(message) == b"\x00\x00\x00\x00\x07" + reference.getvalue()


@pytest.mark.parametrize(
    ("field", "value"),
    [("value", 21), ("event_time", 2**63), ("source_protocol", "HTTP"), ("device_id", None), ("unit", 3)],
)
def test_values_the_compiled_writer_does_not_expect_get_fastavros_answer(field: str, value: Any) -> None:
    reading = {**_GOOD_READING, field: value}
    encoder = AvroEncoder(schema_dict(SENSOR_READING), schema_id=7)
    reference = io.BytesIO()
    try:
        fastavro.schemaless_writer(reference, fastavro.parse_schema(schema_dict(SENSOR_READING)), reading)
    except Exception as exc:  # fastavro's own verdict, whatever it is, stays the answer
        with pytest.raises((SerializationError, type(exc))):
            encoder.encode(reading)
        return
    assert encoder.encode(reading) == b"\x00\x00\x00\x00\x07" + reference.getvalue()


_GOOD_READING: dict[str, Any] = {
    "device_id": "d1",
    "metric": "temperature",
    "value": 21.5,
    "unit": "Cel",
    "event_time": 1_700_000_000_000,
    "ingest_time": 1_700_000_000_001,
    "source_protocol": "MQTT",
    "source": "sensors/d1/temperature",
    "sequence": None,
    "attributes": {"site": "lab"},
}


class _Registry:
    """A registry that knows no schema id: counts how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def get_schema(self, schema_id: int) -> Any:
        self.asked += 1
        raise SchemaRegistryError(404, 40403, f"Schema {schema_id} not found")


def test_an_unknown_schema_id_is_asked_of_the_registry_once_not_per_record() -> None:
    # A producer writing a bogus id would otherwise cost a registry round trip per record, on
    # the consumer's loop: one hostile device's worth of records stalls the whole partition.
    registry, now = _Registry(), [1000.0]
    decoder = AvroDecoder(registry, unknown_for_s=60, clock=lambda: now[0])  # type: ignore[arg-type]
    record = b"\x00\x00\x00\x03\xe7" + b"\x02"  # schema id 999
    for _ in range(100):
        with pytest.raises(SerializationError, match="unknown schema id 999"):
            decoder.decode(record)
        with pytest.raises(SerializationError, match="unknown schema id 999"):
            decoder.read(record)
    assert registry.asked == 1
    # An id registered since is found: a 404 is believed for a while only.
    now[0] += 61
    with pytest.raises(SerializationError):
        decoder.decode(record)
    assert registry.asked == 2
