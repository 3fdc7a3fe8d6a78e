"""The converters with Kafka Connect's JSON and text encoders: the same SensorReading (or
CoapMessage) the Avro path writes, as a JsonConverter consumer reads it; what does not convert is
still rejected for the dead letters; the service hands its output setting to the gateway's start."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from fluxgate_testing import SENSOR_READING_CONNECT_SCHEMA

from fluxgate_coap_ingest import service
from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.messages import CoapMessageConverter
from fluxgate_coap_ingest.observer import Notification
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_coap_ingest.settings import CoapIngestSettings
from fluxgate_core.errors import PayloadError
from fluxgate_core.gateway import with_key
from fluxgate_core.json_records import ConnectJsonEncoder, ConnectStringEncoder, OutputSettings
from fluxgate_core.payloads import CF_JSON
from fluxgate_core.schemas import COAP_MESSAGE, SENSOR_READING, schema_dict
from fluxgate_core.serde import RecordEncoder

URI = "coap://10.0.0.7:5683/sensors/dev-9/temperature"
NOW = 1_764_201_600_000
PAYLOAD = json.dumps({"sensorId": "dev-9", "timestamp": NOW - 1000, "temperature": 21, "seq": 3}).encode()
READING = {"device_id": "dev-9", "metric": "temperature", "value": 21.0, "unit": "Cel", "event_time": NOW - 1000,
           "ingest_time": NOW, "source_protocol": "COAP", "source": URI, "sequence": 3, "attributes": {}}  # fmt: skip


def readings(encoder: RecordEncoder) -> NotificationConverter:
    return NotificationConverter(ResourceSettings(uri=URI), encoder)


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_a_notification_becomes_the_connect_json_of_its_reading(schemas_enable: bool) -> None:
    encoder = ConnectJsonEncoder(schema_dict(SENSOR_READING), schemas_enable)
    (record,) = readings(encoder).convert(URI, PAYLOAD, CF_JSON, NOW)
    value = json.loads(record.value)
    if schemas_enable:
        assert value.keys() == {"schema", "payload"} and value["schema"] == SENSOR_READING_CONNECT_SCHEMA
        value = value["payload"]
    assert (record.key, record.topic) == (b"dev-9", "sensors.readings")
    assert value == READING


def test_string_values_are_the_readings_json_text() -> None:
    (record,) = readings(ConnectStringEncoder(schema_dict(SENSOR_READING))).convert(URI, PAYLOAD, CF_JSON, NOW)
    assert json.loads(record.value.decode("utf-8")) == READING and b" " not in record.value  # compact


def test_a_bad_payload_is_still_rejected() -> None:
    with pytest.raises(PayloadError):
        readings(ConnectJsonEncoder(schema_dict(SENSOR_READING))).convert(URI, b"{not json", CF_JSON, NOW)


def test_a_coap_message_is_written_whole_its_payload_in_base64() -> None:
    """CoapMessage as JsonConverter writes it: bytes are base64, every option field there (null when absent)."""
    converter = CoapMessageConverter(ResourceSettings(uri=URI), ConnectJsonEncoder(schema_dict(COAP_MESSAGE)), 4096)
    binary = bytes(range(256))
    notification = Notification(uri=URI, payload=binary, content_format=None, observe=5, received_ms=NOW)
    envelope = json.loads(converter.convert(notification).value)
    fields = {field["field"]: field for field in envelope["schema"]["fields"]}
    assert envelope["schema"]["name"] == "io.fluxgate.coap.CoapMessage"
    assert fields["payload"] == {"type": "bytes", "optional": False, "default": "", "field": "payload"}
    payload = envelope["payload"]
    assert base64.b64decode(payload["payload"]) == binary
    assert (payload["observe"], payload["ingest_time"], payload["is_notification"]) == (5, NOW, True)
    assert payload.keys() == fields.keys()


@pytest.mark.parametrize("value_format", ["avro", "json", "string"])
async def test_the_service_starts_its_output_as_the_settings_say(
    monkeypatch: pytest.MonkeyPatch, value_format: Any
) -> None:
    asked: dict[str, Any] = {}

    async def open_output(*args: Any, **kwargs: Any) -> None:
        asked.update(kwargs)
        raise RuntimeError("stop here: the test wants only what the gateway was asked")

    monkeypatch.setattr(service, "open_gateway_output", open_output)
    settings = CoapIngestSettings(output=OutputSettings(value_format=value_format))
    with pytest.raises(RuntimeError, match="stop here"):
        await service.CoapIngestService(settings).start()
    assert asked["output"] == OutputSettings(value_format=value_format)


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_keys_are_written_as_the_output_says_the_device_or_the_resource(schemas_enable: bool) -> None:
    output = OutputSettings(value_format="json", key_format="json", key_schemas_enable=schemas_enable)
    (reading,) = readings(with_key(ConnectJsonEncoder(schema_dict(SENSOR_READING)), output)).convert(
        URI, PAYLOAD, CF_JSON, NOW
    )
    encoder = with_key(ConnectJsonEncoder(schema_dict(COAP_MESSAGE)), output)
    notification = Notification(uri=URI, payload=b"{}", content_format=None, observe=5, received_ms=NOW)
    message = CoapMessageConverter(ResourceSettings(uri=URI), encoder, 4096).convert(notification)
    for record, text in ((reading, "dev-9"), (message, URI)):
        envelope = {"schema": {"type": "string", "optional": False}, "payload": text}
        assert json.loads(record.key) == (envelope if schemas_enable else text)
