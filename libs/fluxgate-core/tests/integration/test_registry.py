"""Registering against the real registry the way a fresh pipeline does: every service at once."""

from __future__ import annotations

import json
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from fluxgate_core.errors import RegistryError, SerializationError
from fluxgate_core.schemas import SENSOR_READING, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder, register, value_subject

pytestmark = pytest.mark.integration


def test_services_starting_together_on_a_new_subject_all_get_the_same_id(stack: Any) -> None:
    # `make run` starts both gateways and the aggregator at once; Apicurio then answered
    # all but one of them 409 "rule already exists" about one start in four.
    def start_a_service(subject: str) -> int:
        client = SchemaRegistryClient({"url": stack.registry_url})
        return register(client, subject, schema_text(SENSOR_READING), "BACKWARD")

    for _ in range(15):
        subject = f"race-{uuid.uuid4().hex}-value"
        with ThreadPoolExecutor(6) as pool:
            ids = set(pool.map(start_a_service, [subject] * 6))
        assert len(ids) == 1, ids


def test_an_incompatible_schema_is_refused_at_once(registry_client: Any) -> None:
    subject = f"incompatible-{uuid.uuid4().hex}-value"
    register(registry_client, subject, '{"type":"record","name":"A","fields":[{"name":"a","type":"int"}]}', "BACKWARD")
    with pytest.raises(RegistryError, match="Incompatible"):
        register(
            registry_client, subject, '{"type":"record","name":"A","fields":[{"name":"b","type":"string"}]}', "BACKWARD"
        )


def _sensor_reading_v2() -> dict[str, Any]:
    """SensorReading plus an optional ``firmware``: a BACKWARD-compatible next version."""
    newer = schema_dict(SENSOR_READING)
    newer["fields"] = [*newer["fields"], {"name": "firmware", "type": ["null", "string"], "default": None}]
    return newer


READING = {
    "device_id": "d1",
    "metric": "temperature",
    "value": 21.5,
    "unit": "Cel",
    "event_time": 1_767_225_600_000,
    "ingest_time": 1_767_225_600_050,
    "source_protocol": "MQTT",
    "source": "devices/d1/temperature",
    "sequence": None,
    "attributes": {},
}


def test_a_decoder_made_before_a_version_was_registered_decodes_it_at_once(registry_client: Any) -> None:
    """What the persisters' runner and device-status rely on (issue 36 §2): a writer schema is
    fetched by id when first met, so a version registered mid-run is never taken for an
    unknown id; an id the registry does not know is a SerializationError (a dead letter)."""
    topic = f"rollout-{uuid.uuid4().hex}"
    v1 = AvroEncoder.registered(registry_client, topic, schema_text(SENSOR_READING), schema_dict(SENSOR_READING))
    decoder = AvroDecoder(registry_client, schema_dict(SENSOR_READING))
    assert decoder.decode(v1.encode(READING))["device_id"] == "d1"
    newer = _sensor_reading_v2()
    v2 = AvroEncoder(newer, register(registry_client, value_subject(topic), json.dumps(newer), "BACKWARD"))
    assert v2.schema_id != v1.schema_id
    assert decoder.decode(v2.encode({**READING, "firmware": "2.1", "value": 22.0}))["value"] == 22.0
    assert AvroDecoder(registry_client).decode(v2.encode({**READING, "firmware": "2.1"}))["firmware"] == "2.1"
    with pytest.raises(SerializationError, match="unknown schema id 2147483647"):
        decoder.decode(b"\x00\x7f\xff\xff\xff" + v1.encode(READING)[5:])


def test_an_unreachable_registry_is_a_retriable_error_never_a_dead_letter() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        decoder = AvroDecoder(SchemaRegistryClient({"url": url, "max.retries": 0}))
        with pytest.raises(RegistryError, match="unreachable") as error:
            decoder.decode(b"\x00\x00\x00\x00\x07" + b"\x02d1")
    assert error.value.retriable and not isinstance(error.value, SerializationError)
