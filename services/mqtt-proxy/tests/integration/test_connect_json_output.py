"""mqtt-proxy writing Kafka Connect's JSON (OUTPUT__VALUE_FORMAT json, with and without schemas)
and StringConverter's text, against real Mosquitto and Kafka: each record is what a JsonConverter
consumer reads, read here with a plain json.loads. The registry URL points at nothing: these
formats must neither need nor contact it. A bad payload still goes to the dead-letter topic."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fluxgate_testing import SENSOR_READING_CONNECT_SCHEMA, consume

pytestmark = pytest.mark.integration
Setup = Any  # the `setup` fixture's type lives in conftest.py, which tests cannot import
NO_REGISTRY = "http://127.0.0.1:9"  # discard: a proxy that contacted it would fail to start


def proxy_writing(setup: Setup, value_format: str, schemas_enable: str = "true") -> Any:
    return setup.proxy(
        OUTPUT__VALUE_FORMAT=value_format, OUTPUT__VALUE_SCHEMAS_ENABLE=schemas_enable, REGISTRY__URL=NO_REGISTRY
    ).start()


def published(setup: Setup) -> tuple[int, str]:
    stamp = int(time.time() * 1000) - 5_000
    topic = f"{setup.prefix}/dev-1/temperature"
    setup.publish([(topic, json.dumps({"timestamp": stamp, "temperature": 21, "seq": 7}))], 1)
    return stamp, topic


def assert_payload(payload: dict[str, Any], stamp: int, topic: str) -> None:
    ingest = payload.pop("ingest_time")
    assert isinstance(ingest, int) and stamp <= ingest <= int(time.time() * 1000)
    assert payload == {
        "device_id": "dev-1",
        "metric": "temperature",
        "value": 21.0,
        "unit": "Cel",
        "event_time": stamp,
        "source_protocol": "MQTT",
        "source": topic,
        "sequence": 7,
        "attributes": {},
    }


def test_json_with_schemas_is_the_connect_envelope(setup: Setup) -> None:
    proxy_writing(setup, "json", "true")
    stamp, topic = published(setup)
    (record,) = consume(setup.stack.bootstrap, setup.readings, expected=1, timeout=60)
    assert record.key == b"dev-1"
    envelope = json.loads(record.value)
    assert envelope.keys() == {"schema", "payload"}
    assert envelope["schema"] == SENSOR_READING_CONNECT_SCHEMA
    assert b'"value":21.0' in record.value  # a float64 is written as a double, as Jackson does
    assert_payload(envelope["payload"], stamp, topic)


@pytest.mark.parametrize("value_format", ["json", "string"])
def test_json_without_schemas_and_string_are_the_bare_record(setup: Setup, value_format: str) -> None:
    proxy_writing(setup, value_format, "false")
    stamp, topic = published(setup)
    (record,) = consume(setup.stack.bootstrap, setup.readings, expected=1, timeout=60)
    payload = json.loads(record.value)
    assert "schema" not in payload and " " not in record.value.decode()  # compact, as JsonConverter writes
    assert_payload(payload, stamp, topic)


def test_a_bad_payload_still_goes_to_the_dead_letter_topic(setup: Setup) -> None:
    proxy = proxy_writing(setup, "json", "true")
    setup.publish([(f"{setup.prefix}/dev-1/temperature", "{not json")], 1)
    setup.publish([(f"{setup.prefix}/dev-1/temperature", "19.5")], 1)
    (letter,) = consume(setup.stack.bootstrap, setup.deadletters, expected=1, timeout=60)
    assert letter.value == b"{not json"
    assert letter.header("fluxgate.dlq.service") == b"mqtt-proxy" and letter.header("fluxgate.dlq.reason")
    (record,) = consume(setup.stack.bootstrap, setup.readings, expected=1, timeout=60)
    assert json.loads(record.value)["payload"]["value"] == 19.5
    assert proxy.process is not None and proxy.process.poll() is None
