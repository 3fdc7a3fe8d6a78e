"""Provider verification of the pacts on coap-ingest's CoAP message records (output_format coap-message).

coap-ingest's real ``CoapMessageConverter`` turns CoAP responses (aiocoap messages, as the observer
hands them on) into Kafka records with the real ``AvroEncoder``; each value is decoded by the real
``AvroDecoder`` with the writer's schema and handed, as JSON (bytes as base64), to the Pact verifier.
The consumer is the Hazelcast persister (``services/persisters/hazelcast/tests/contract``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aiocoap
import pytest
from fluxgate_testing.pact import COAP_MESSAGES_MESSAGE, pacts_dir
from fluxgate_testing.pact_provider import SCHEMA_ID, message_of, verify

from fluxgate_coap_ingest.messages import CoapMessageConverter, message_record
from fluxgate_coap_ingest.observer import Notification
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_coap_ingest.settings import SERVICE as COAP_INGEST
from fluxgate_core.schemas import COAP_MESSAGE, schema_dict
from fluxgate_core.serde import AvroEncoder

CONSUMERS = ("hazelcast-persister",)
URI = "coap://127.0.0.1:5633/sensors"
RESOURCE = ResourceSettings(uri=URI, topic="coap_sensor_topic")
NOW_MS = 1_700_000_000_000


def response(payload: bytes, code: aiocoap.numbers.Code = aiocoap.CONTENT, **options: Any) -> Notification:
    message = aiocoap.Message(code=code, payload=payload, **options)
    message.mid, message.mtype, message.token = 4711, aiocoap.CON, b"\x0b\x1c"
    content_format = None if message.opt.content_format is None else int(message.opt.content_format)
    return Notification(URI, payload, content_format, message.opt.observe, NOW_MS, message=message, rtt_ms=3)


RESPONSES = {
    "json notification": response(b'{"temperature": 23.6}', observe=17, content_format=50),
    "binary payload": response(bytes(range(200)), observe=1, content_format=42),
    "empty payload": response(b"", observe=2),
    "registration answer": response(b"21.5"),
    "error response": response(b"not here", code=aiocoap.NOT_FOUND),
}


def message(notification: Notification, schema: dict[str, Any]) -> bytes:
    converter = CoapMessageConverter(RESOURCE, AvroEncoder(schema, SCHEMA_ID), max_payload_bytes=4096)
    return message_of(schema, converter.convert(notification).value)


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("notification", RESPONSES.values(), ids=RESPONSES.keys())
def test_every_coap_message_satisfies_every_consumer_pact(notification: Notification, consumer: str) -> None:
    verify(COAP_INGEST, message(notification, schema_dict(COAP_MESSAGE)), consumer)


def test_every_pact_on_coap_messages_is_verified_here() -> None:
    on_disk = {path.name for path in pacts_dir().glob(f"*-{COAP_INGEST}.json") if _on_coap_messages(path)}
    assert on_disk == {f"{consumer}-{COAP_INGEST}.json" for consumer in CONSUMERS}


def _on_coap_messages(pact_file: Path) -> bool:
    interactions = json.loads(pact_file.read_text(encoding="utf-8"))["interactions"]
    return any(interaction["description"] == COAP_MESSAGES_MESSAGE for interaction in interactions)


def test_dropping_a_consumed_field_fails_naming_it() -> None:
    schema = copy.deepcopy(schema_dict(COAP_MESSAGE))
    schema["fields"] = [field for field in schema["fields"] if field["name"] != "code"]
    produced = message(RESPONSES["json notification"], schema)
    with pytest.raises(
        AssertionError, match=r"coap-ingest breaks the hazelcast-persister .*\n.*missing the following keys: code"
    ):
        verify(COAP_INGEST, produced, "hazelcast-persister")


def test_a_payload_that_is_not_base64_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # The payload written as text (Stream-Reactor's way) instead of bytes breaks the readers' decoding.
    schema = copy.deepcopy(schema_dict(COAP_MESSAGE))
    schema["fields"][-1] = {"name": "payload", "type": "string"}
    record = {**message_record(RESPONSES["json notification"]), "payload": "temperature: 23.6"}
    monkeypatch.setattr("fluxgate_coap_ingest.messages.message_record", lambda notification: record)
    produced = message(RESPONSES["json notification"], schema)
    with pytest.raises(AssertionError, match=r"coap-ingest breaks the hazelcast-persister .*\n.*payload"):
        verify(COAP_INGEST, produced, "hazelcast-persister")
