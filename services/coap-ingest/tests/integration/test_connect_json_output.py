"""coap-ingest writing Kafka Connect's JSON (OUTPUT__VALUE_FORMAT json, with schemas) and
StringConverter's text, against real Kafka and a simulated CoAP device: each record reads back,
through the sink runtime's JsonConverter reading, as the record the Avro path writes of the same
notification (its ingest_time aside). Those two never have a registry: their URL points at a
closed port, and an ingest that contacted it would fail to start."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from coap_payloads import T0, reading_json
from fluxgate_testing import SENSOR_READING_CONNECT_SCHEMA, consume, unique_topic

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.serde import AvroDecoder
from fluxgate_sim.coap import CoapDeviceServer
from fluxgate_sink.formats import ConnectJsonDecoder

pytestmark = pytest.mark.integration
NO_REGISTRY = "http://127.0.0.1:9"  # discard: nothing listens, so contacting it fails the start
WRITING = {  # each ingest's settings beside its resources; Avro is the default, through the stack's registry
    "avro": {},
    "json": {"OUTPUT__VALUE_FORMAT": "json", "REGISTRY__URL": NO_REGISTRY},
    "string": {"OUTPUT__VALUE_FORMAT": "string", "OUTPUT__VALUE_SCHEMAS_ENABLE": "false", "REGISTRY__URL": NO_REGISTRY},
}


def in_ms(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its timestamps as epoch milliseconds (Avro and the envelope give datetimes)."""
    return {name: round(v.timestamp() * 1000) if isinstance(v, datetime) else v for name, v in record.items()}


def read_back(value_format: str, records: list[ConsumedRecord], decoder: AvroDecoder) -> list[dict[str, Any]]:
    """Each record as its format's consumer reads it, in event-time order, without its ingest_time."""
    decode = {
        "avro": decoder.decode,
        "json": ConnectJsonDecoder(schemas_enable=True).decode,
        "string": ConnectJsonDecoder(schemas_enable=False, text=True).decode,
    }[value_format]
    read = [in_ms(decode(record.value)) | {"key": record.key} for record in records]
    assert all(isinstance(record.pop("ingest_time"), int) for record in read)
    return sorted(read, key=lambda record: record["event_time"])


async def test_json_and_string_records_read_back_as_the_avro_record(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    targets = {
        "avro": topics[0],
        **{kind: unique_topic(f"test.coap.{kind}", stack.bootstrap) for kind in ("json", "string")},
    }
    async with CoapDeviceServer(port=0) as server:
        server.publish("dev-j", "temperature", reading_json("dev-j", "temperature", 20.5, T0))
        resources = server.resources_config()
        ingests = {
            kind: start_ingest([{**r, "topic": targets[kind]} for r in resources], READINESS="all", **settings)
            for kind, settings in WRITING.items()
        }
        for ingest in ingests.values():  # the registration's answer (the current state) is their first record
            await asyncio.to_thread(ingest.wait_ready, 120)
        server.publish("dev-j", "temperature", reading_json("dev-j", "temperature", 21.5, T0 + 1000))
        got = {
            kind: await asyncio.to_thread(consume, stack.bootstrap, topic, expected=2, timeout=90)
            for kind, topic in targets.items()
        }
        assert [await asyncio.to_thread(ingest.terminate) for ingest in ingests.values()] == [0, 0, 0]
    avro = read_back("avro", got["avro"], decoder)
    assert [(r["key"], r["value"], r["event_time"]) for r in avro] == [
        (b"dev-j", 20.5, T0),
        (b"dev-j", 21.5, T0 + 1000),
    ]
    assert read_back("json", got["json"], decoder) == avro
    assert read_back("string", got["string"], decoder) == avro
    for record in got["json"]:  # the envelope's schema is SensorReading's Connect schema, as written out by hand
        assert json.loads(record.value)["schema"] == SENSOR_READING_CONNECT_SCHEMA
    for record in got["string"]:  # the bare JSON text, compact as JsonConverter writes it
        assert "schema" not in json.loads(record.value) and b" " not in record.value
