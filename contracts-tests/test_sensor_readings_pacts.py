"""Provider verification of the pacts on ``sensors.readings``: the aggregator's and device-status's.

Each producer's real converter (``MessageConverter`` for mqtt-proxy,
``NotificationConverter`` for coap-ingest) turns a device payload into Kafka records
with the real ``AvroEncoder``; the value is decoded from its Confluent wire-format bytes
by the real ``AvroDecoder`` and handed, as JSON, to the Pact verifier, which applies the
pact's matching rules. Nothing here compares dicts by hand.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cbor2
import pytest
from fluxgate_testing import pact_provider
from fluxgate_testing.pact import READINGS_MESSAGE
from fluxgate_testing.pact_provider import SCHEMA_ID, message_of

from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_coap_ingest.settings import SERVICE as COAP_INGEST
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.payloads import CF_CBOR, CF_JSON, CF_SENML_JSON
from fluxgate_core.readings import build_reading
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder
from fluxgate_mqtt_proxy.convert import MessageConverter
from fluxgate_mqtt_proxy.route_settings import default_routes
from fluxgate_mqtt_proxy.settings import SERVICE as MQTT_PROXY

PACTS_DIR = Path(__file__).resolve().parent / "pacts"
CONSUMERS = ("aggregator", "device-status")
NOW_MS = 1_700_000_000_000  # fixed ingest time: the messages, and so the runs, are deterministic
COAP_URI = "coap://10.0.0.7:5683/sensors/dev-9/temperature"
JSON_OBJECT = {"sensorId": "Sensor4", "timestamp": 1486997194029, "temperature": 23.6}
SENML_PACK = [
    {"bn": "urn:dev:ow:10e2073a:", "bt": 1_700_000_000, "n": "temp", "u": "Cel", "v": 22.5},
    {"n": "pressure", "v": 1013, "t": 1.5},  # no unit and none by default: unit is null
]

Produce = Callable[[AvroEncoder], list[KafkaRecord]]


@dataclass(frozen=True)
class Producer:
    """A producer's real serialization, with the writer schema it registers."""

    name: str
    produce: Produce
    schema: dict[str, Any]

    def messages(self) -> list[bytes]:
        """Each record value decoded with the writer's own schema, as the JSON the verifier matches.

        Decoding with the writer schema (not the aggregator's reader schema) matters: Avro
        resolution would fill a dropped field with its default and hide the break.
        """
        records = self.produce(AvroEncoder(self.schema, SCHEMA_ID))
        assert records, f"{self.name} produced no record"
        return [message_of(self.schema, record.value) for record in records]


def verify(provider: str, message: bytes, consumer: str = "aggregator") -> None:
    """Run the Pact verifier for ``consumer``'s pact with ``provider`` (the aggregator's by default)."""
    pact_provider.verify(provider, message, consumer)


def reading_schema() -> dict[str, Any]:
    return schema_dict(SENSOR_READING)


def mqtt(topic: str, payload: bytes) -> Produce:
    """mqtt-proxy with its default routes (``sensors/<device>/<metric>``, ``devices/<device>/senml``)."""
    return lambda encoder: MessageConverter(default_routes(), encoder).convert(topic, payload, {"fw": "1.2"}, NOW_MS)


def coap(payload: bytes, content_format: int | None, **resource: Any) -> Produce:
    def produce(encoder: AvroEncoder) -> list[KafkaRecord]:
        converter = NotificationConverter(ResourceSettings(uri=COAP_URI, **resource), encoder)
        return converter.convert(COAP_URI, payload, content_format, NOW_MS)

    return produce


MQTT_PAYLOADS = {
    "json object": mqtt("sensors/Sensor4/temperature", json.dumps(JSON_OBJECT).encode()),
    "bare number": mqtt("sensors/d9/temperature", b"21"),
    "senml pack": mqtt("devices/dev-3/senml", json.dumps(SENML_PACK).encode()),
}
COAP_PAYLOADS = {
    "json object": coap(json.dumps(JSON_OBJECT).encode(), CF_JSON),
    "cbor object": coap(cbor2.dumps(JSON_OBJECT), CF_CBOR),
    "senml pack": coap(json.dumps(SENML_PACK).encode(), CF_SENML_JSON),
    "bare number": coap(b"21.25", None, device_from="path:1", metric_from="path:2"),
}
PRODUCERS = [
    *(
        pytest.param(Producer(MQTT_PROXY, produce, reading_schema()), id=f"mqtt-{kind}")
        for kind, produce in MQTT_PAYLOADS.items()
    ),
    *(
        pytest.param(Producer(COAP_INGEST, produce, reading_schema()), id=f"coap-{kind}")
        for kind, produce in COAP_PAYLOADS.items()
    ),
]


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_producer_satisfies_every_consumer_pact(producer: Producer, consumer: str) -> None:
    for message in producer.messages():
        verify(producer.name, message, consumer)


def test_every_pact_on_the_topic_is_verified_here() -> None:
    # A new consumer of sensors.readings writes its pacts; they count only once verified here.
    gateways = (MQTT_PROXY, COAP_INGEST)
    on_disk = {path.name for path in PACTS_DIR.glob("*.json") if path.stem.endswith(gateways) and on_readings(path)}
    verified = {f"{consumer}-{gateway}.json" for consumer in CONSUMERS for gateway in gateways}
    assert on_disk == verified, f"pacts on sensors.readings nobody verifies: {sorted(on_disk - verified)}"


def on_readings(pact_file: Path) -> bool:
    """Whether the pact is about ``sensors.readings`` (coap-ingest's CoAP messages have their own)."""
    interactions = json.loads(pact_file.read_text(encoding="utf-8"))["interactions"]
    return any(interaction["description"] == READINGS_MESSAGE for interaction in interactions)


def without_field(schema: dict[str, Any], name: str) -> dict[str, Any]:
    changed = copy.deepcopy(schema)
    changed["fields"] = [field for field in changed["fields"] if field["name"] != name]
    return changed


def renamed_field(schema: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    changed = copy.deepcopy(schema)
    changed["fields"] = [{**field, "name": new} if field["name"] == old else field for field in changed["fields"]]
    return changed


def test_a_producer_dropping_a_consumed_field_fails_naming_it() -> None:
    # The .avsc loses ``unit``: the encoder then skips the key the converter still fills.
    producer = Producer(MQTT_PROXY, MQTT_PAYLOADS["json object"], without_field(reading_schema(), "unit"))
    (message,) = producer.messages()
    assert b'"unit"' not in message
    with pytest.raises(
        AssertionError, match=r"mqtt-proxy breaks the aggregator .*\n.*missing the following keys: unit"
    ):
        verify(producer.name, message)


def test_a_producer_renaming_a_consumed_field_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Schema and converter renamed together, as a deliberate producer refactoring would.
    def camel_case(*args: Any) -> dict[str, Any]:
        reading = build_reading(*args)
        reading["eventTime"] = reading.pop("event_time")
        return reading

    monkeypatch.setattr("fluxgate_coap_ingest.convert.build_reading", camel_case)
    schema = renamed_field(reading_schema(), "event_time", "eventTime")
    (message,) = Producer(COAP_INGEST, COAP_PAYLOADS["json object"], schema).messages()
    assert b'"eventTime"' in message
    with pytest.raises(
        AssertionError, match=r"coap-ingest breaks the aggregator .*\n.*missing the following keys: event_time"
    ):
        verify(COAP_INGEST, message)


def test_a_field_only_device_status_reads_is_its_own_contract() -> None:
    # ``source`` dropped: the aggregator never reads it and does not care; device-status
    # shows where each device was last heard from, and its pact fails naming the field.
    # (``ingest_time`` was this example until the aggregator judged clocks by it.)
    producer = Producer(COAP_INGEST, COAP_PAYLOADS["cbor object"], without_field(reading_schema(), "source"))
    (message,) = producer.messages()
    verify(COAP_INGEST, message, "aggregator")
    with pytest.raises(
        AssertionError, match=r"coap-ingest breaks the device-status .*\n.*missing the following keys: source"
    ):
        verify(COAP_INGEST, message, "device-status")
