"""The converter: one notification into exact SensorReading records, for every payload kind."""

from __future__ import annotations

import io
import json
from datetime import datetime
from typing import Any

import cbor2
import fastavro
import pytest

from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_core.errors import InvalidReading, PayloadError
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.payloads import CF_CBOR, CF_JSON, CF_SENML_CBOR, CF_SENML_JSON
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder

URI = "coap://10.0.0.7:5683/sensors/dev-9/temperature"
NOW = 1_700_000_000_000
SCHEMA_ID = 42


def converter(**resource: Any) -> NotificationConverter:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), SCHEMA_ID)
    return NotificationConverter(ResourceSettings(uri=URI, **resource), encoder)


def decode(record: KafkaRecord) -> dict[str, Any]:
    assert record.value[0] == 0 and int.from_bytes(record.value[1:5], "big") == SCHEMA_ID
    parsed = fastavro.parse_schema(schema_dict(SENSOR_READING))
    decoded: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(record.value[5:]), parsed, None)
    # fastavro turns timestamp-millis into datetimes; compare in the epoch millis we wrote.
    return {k: round(v.timestamp() * 1000) if isinstance(v, datetime) else v for k, v in decoded.items()}


def test_json_object_becomes_one_exact_reading() -> None:
    payload = json.dumps({"sensorId": "Sensor4", "timestamp": 1486997194029, "temperature": 23.6}).encode()
    (record,) = converter().convert(URI, payload, CF_JSON, now_ms=NOW)
    assert record.topic == "sensors.readings"
    assert record.key == b"Sensor4"
    assert decode(record) == {
        "device_id": "Sensor4",
        "metric": "temperature",
        "value": 23.6,
        "unit": "Cel",
        "event_time": 1486997194029,
        "ingest_time": NOW,
        "source_protocol": "COAP",
        "source": URI,
        "sequence": None,  # the payload has no seq, and the observe number is no reading's identity
        "attributes": {},
    }


def test_sequence_is_the_payloads_own() -> None:
    payload = b'{"sensorId":"s","timestamp":1486997194029,"humidity":40.5,"seq":3}'
    (record,) = converter().convert(URI, payload, CF_JSON, now_ms=NOW)
    assert decode(record)["sequence"] == 3
    assert decode(record)["unit"] == "%RH"


def test_bare_number_takes_device_and_metric_from_the_uri_path() -> None:
    conv = converter(device_from="path:1", metric_from="path:2", topic="t.readings")
    (record,) = conv.convert(URI, b"21.25", None, now_ms=NOW)
    reading = decode(record)
    assert record.topic == "t.readings" and record.key == b"dev-9"
    assert (reading["device_id"], reading["metric"], reading["value"]) == ("dev-9", "temperature", 21.25)
    assert reading["event_time"] == NOW and reading["sequence"] is None


def test_payload_device_wins_over_configuration() -> None:
    payload = b'{"sensorId":"from-payload","brightness":310}'
    (record,) = converter(device_id="configured").convert(URI, payload, CF_JSON, now_ms=NOW)
    assert decode(record)["device_id"] == "from-payload"


def test_senml_json_pack_becomes_one_record_per_value() -> None:
    pack = [
        {"bn": "urn:dev:ow:10e2073a:", "bt": 1_700_000_000, "n": "temp", "u": "Cel", "v": 22.5},
        {"n": "hum", "u": "%RH", "v": 41, "t": 1.5},
    ]
    records = converter().convert(URI, json.dumps(pack).encode(), CF_SENML_JSON, now_ms=NOW)
    readings = [decode(record) for record in records]
    assert [(r["device_id"], r["metric"], r["value"], r["unit"], r["event_time"]) for r in readings] == [
        ("urn:dev:ow:10e2073a", "temperature", 22.5, "Cel", 1_700_000_000_000),
        ("urn:dev:ow:10e2073a", "humidity", 41.0, "%RH", 1_700_000_001_500),
    ]
    assert {record.key for record in records} == {b"urn:dev:ow:10e2073a"}
    assert all(r["sequence"] is None for r in readings)


def test_senml_cbor_with_integer_labels() -> None:
    # RFC 8428 labels: bn -2, n 0, u 1, v 2, t 6.
    payload = cbor2.dumps([{-2: "coap-0001:", 0: "temperature", 1: "Cel", 2: 19.75, 6: 1_700_000_000.25}])
    conversion = converter().conversion(URI, payload, CF_SENML_CBOR, now_ms=NOW)
    (reading,) = [decode(record) for record in conversion.records]
    assert (reading["device_id"], reading["value"], reading["event_time"]) == ("coap-0001", 19.75, 1_700_000_000_250)
    assert conversion.device_timed


def test_cbor_map() -> None:
    payload = cbor2.dumps({"sensorId": "c1", "temperature": 20.5})
    conversion = converter().conversion(URI, payload, CF_CBOR, now_ms=NOW)
    assert decode(conversion.records[0])["value"] == 20.5
    assert not conversion.device_timed


def test_payload_format_override_beats_the_content_format() -> None:
    conv = converter(device_id="d", metric="temperature", payload_format="number")
    with pytest.raises(PayloadError, match="expected a bare number"):
        conv.convert(URI, b'{"temperature": 1}', CF_JSON, now_ms=NOW)
    assert len(conv.convert(URI, b"7", CF_SENML_JSON, now_ms=NOW)) == 1


@pytest.mark.parametrize(
    ("payload", "content_format", "error"),
    [
        (b'{"sensorId": "s", "temperature": ', CF_JSON, PayloadError),
        (b'{"sensorId": "s", "temperature": "warm"}', CF_JSON, PayloadError),
        (b"12:34:56", 0, PayloadError),
        (b"\xff\x00", CF_SENML_CBOR, PayloadError),
        (b'{"temperature": 20}', CF_JSON, InvalidReading),  # no device anywhere
        (b'{"sensorId": "s", "timestamp": 5, "temperature": 20}', CF_JSON, InvalidReading),  # clock unset
    ],
)
def test_bad_notifications_raise(payload: bytes, content_format: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        converter().convert(URI, payload, content_format, now_ms=NOW)


def test_string_fields_cannot_multiply_a_notification_past_the_output_limit() -> None:
    # Every string field is an attribute of every reading: 50 KB x 100 readings is 5 MB of
    # records from one 51 KB notification, over the 1 MiB one may produce by default.
    payload = json.dumps({"sensorId": "d1", "note": "x" * 50_000, **{f"m{i}": i for i in range(100)}}).encode()
    with pytest.raises(PayloadError, match=r"over the limit of 1048576 bytes .* per message"):
        converter().convert(URI, payload, CF_JSON, NOW)
