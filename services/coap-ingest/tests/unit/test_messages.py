"""Output format coap-message: a notification into Stream-Reactor's CoAP message record, every field,
through the real Avro encoder; what is dead-lettered in that mode."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import aiocoap
import fastavro
import pytest

from fluxgate_coap_ingest.blockwise import TransferAbandoned
from fluxgate_coap_ingest.messages import CoapMessageConverter, MessageHandler, message_record
from fluxgate_coap_ingest.observer import Notification
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_core.errors import SerializationError
from fluxgate_core.limits import PayloadTooLarge
from fluxgate_core.schemas import COAP_MESSAGE, schema_dict
from fluxgate_core.serde import AvroEncoder

URI = "coap://127.0.0.1:5690/sensors/dev-1/temperature"
NOW_MS = 1_700_000_000_000
RESOURCE = ResourceSettings(uri=URI, topic="coap_sensor_topic", device_from="path:1")


def response(payload: bytes = b"21.5", code: aiocoap.numbers.Code = aiocoap.CONTENT, **options: Any) -> aiocoap.Message:
    message = aiocoap.Message(code=code, payload=payload)
    message.mid, message.mtype, message.token = 4711, aiocoap.CON, bytes.fromhex("c0ffee01")
    message.remote = SimpleNamespace(hostinfo="127.0.0.1:5690", hostinfo_local="127.0.0.1:41000")
    for name, value in options.items():
        setattr(message.opt, name, value)
    return message


def notification(message: aiocoap.Message, **changes: Any) -> Notification:
    fields: dict[str, Any] = {
        "uri": URI,
        "payload": message.payload,
        "content_format": None if message.opt.content_format is None else int(message.opt.content_format),
        "observe": message.opt.observe,
        "received_ms": NOW_MS,
        "message": message,
        "rtt_ms": 12,
    }
    return Notification(**{**fields, **changes})


def converter(max_payload_bytes: int = 4096) -> CoapMessageConverter:
    """The real encoder of the real schema, under a fixed id (what the registry would give it)."""
    return CoapMessageConverter(RESOURCE, AvroEncoder(schema_dict(COAP_MESSAGE), schema_id=7), max_payload_bytes)


def decoded(value: bytes) -> dict[str, Any]:
    schema = fastavro.parse_schema(schema_dict(COAP_MESSAGE))
    record: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema, None)  # type: ignore[assignment]
    return record


def test_a_notification_with_every_option_fills_every_field() -> None:
    message = response(
        b'{"t":21.5}', observe=17, content_format=50, etags=[b"\x01\xab"], max_age=30, block2=(0, False, 6)
    )
    message.opt.accept, message.opt.size2 = 50, 10
    message.opt.location_path, message.opt.location_query = ("a", "b"), ("x=1", "y=2")
    message.opt.uri_host, message.opt.uri_port, message.opt.proxy_uri = "h", 5699, "coap://p/q"
    message.opt.uri_path, message.opt.uri_query = ("s", "t"), ("k=v",)
    message.opt.block1, message.opt.size1 = (2, True, 4), 99
    record = converter().convert(notification(message))
    assert (record.topic, record.key) == ("coap_sensor_topic", URI.encode())
    assert decoded(record.value) == {
        "ingest_time": NOW_MS,
        "message_id": 4711,
        "type": "CON",
        "code": "2.05",
        "raw_code": 69,
        "rtt": 12,
        "is_last": False,
        "is_notification": True,
        "source": "127.0.0.1:5690",
        "destination": "127.0.0.1:41000",
        "timestamp": NOW_MS,
        "token": "c0ffee01",
        "is_duplicate": False,
        "is_confirmable": True,
        "is_rejected": False,
        "is_acknowledged": True,
        "is_canceled": False,
        "accept": 50,
        "block1": "(szx=4/256, m=true, num=2)",
        "block2": "(szx=6/1024, m=false, num=0)",
        "content_format": 50,
        "etags": ["01ab"],
        "location_path": "a/b",
        "location_query": "x=1&y=2",
        "max_age": 30,
        "observe": 17,
        "proxy_uri": "coap://p/q",
        "size_1": "99",
        "size_2": "10",
        "uri_host": "h",
        "uri_port": 5699,
        "uri_path": "s/t",
        "uri_query": "k=v",
        "payload": b'{"t":21.5}',
    }


def test_a_plain_response_without_options_has_nulls_and_stream_reactors_defaults() -> None:
    message = response(b"", code=aiocoap.CONTENT)
    message.mtype = aiocoap.NON
    record = decoded(converter().convert(notification(message)).value)
    assert record["payload"] == b""  # an empty payload is a message all the same
    assert (record["type"], record["is_confirmable"], record["is_acknowledged"]) == ("NON", False, False)
    assert (record["observe"], record["is_notification"], record["is_last"]) == (None, False, True)
    assert (record["block1"], record["block2"]) == ("", "")  # as Stream-Reactor wrote an absent block
    assert record["max_age"] == 60  # CoAP's default Max-Age
    assert record["etags"] == []
    absent = ("accept", "content_format", "location_path", "location_query", "proxy_uri", "size_1", "size_2")
    assert all(record[name] is None for name in (*absent, "uri_host", "uri_port", "uri_path", "uri_query"))


def test_the_payload_is_the_bytes_as_received_whatever_the_format() -> None:
    binary = bytes(range(256))
    message = response(binary, content_format=42)  # application/octet-stream: Stream-Reactor wrote ""
    assert decoded(converter().convert(notification(message)).value)["payload"] == binary


def test_an_error_response_is_a_message_too() -> None:
    record = decoded(converter().convert(notification(response(b"gone", code=aiocoap.NOT_FOUND))).value)
    assert (record["code"], record["raw_code"], record["payload"]) == ("4.04", 132, b"gone")


def test_without_a_remote_source_and_destination_are_null() -> None:
    message = response()
    message.remote = None
    record = message_record(notification(message))
    assert (record["source"], record["destination"]) == (None, None)


def test_a_block_wise_payload_is_the_assembled_one_with_the_first_blocks_option() -> None:
    first = response(b"x" * 16, block2=(0, True, 0), observe=3)
    assembled = notification(first, payload=b"x" * 40)
    record = decoded(converter().convert(assembled).value)
    assert record["payload"] == b"x" * 40
    assert record["block2"] == "(szx=0/16, m=true, num=0)"


# --- what the handler hands on, and what it dead-letters -------------------------------------------


def test_every_notification_is_one_record_even_a_repeated_payload() -> None:
    handler = MessageHandler(converter())
    first, again = notification(response(observe=1)), notification(response(observe=2))
    deliveries = [handler.delivery(first), handler.delivery(again)]
    assert [len(d.records) for d in deliveries] == [1, 1]
    assert all(d.rejected is None for d in deliveries)


def test_a_payload_over_the_limit_is_dead_lettered_with_the_coap_headers() -> None:
    delivery = MessageHandler(converter(max_payload_bytes=3)).delivery(notification(response(b"1234", observe=5)))
    assert isinstance(delivery.rejected, PayloadTooLarge) and not delivery.records
    assert delivery.letter.payload == b"1234"
    assert delivery.letter.key == "dev-1"
    assert dict(delivery.letter.headers) == {"coap.observe": b"5"}


def test_an_abandoned_block_wise_transfer_is_dead_lettered() -> None:
    delivery = MessageHandler(converter()).delivery(notification(response(b"x" * 64), abandoned=True))
    assert isinstance(delivery.rejected, TransferAbandoned)


def test_a_record_that_does_not_fit_the_schema_is_dead_lettered_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("fluxgate_coap_ingest.messages.message_record", lambda n: {"message_id": "not an int"})
    delivery = MessageHandler(converter()).delivery(notification(response()))
    assert isinstance(delivery.rejected, SerializationError)
