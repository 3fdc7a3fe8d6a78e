"""mqtt-proxy writing its record keys as Kafka Connect's key converters do (OUTPUT__KEY_FORMAT), against
real Mosquitto, Kafka and the registry: JsonConverter's string key with and without schemas (no registry
needed or contacted, with JSON values), and AvroConverter's, an Avro string registered under
``<topic>-key`` that reads back through the registry by the schema id in its wire header."""

from __future__ import annotations

import io
import json
import struct
import time
from typing import Any

import fastavro
import pytest
from fluxgate_testing import consume

pytestmark = pytest.mark.integration
Setup = Any  # the `setup` fixture's type lives in conftest.py, which tests cannot import
NO_REGISTRY = "http://127.0.0.1:9"  # discard: a proxy that contacted it would fail to start


def publish_one(setup: Setup, device: str) -> None:
    stamp = int(time.time() * 1000) - 5_000
    setup.publish([(f"{setup.prefix}/{device}/temperature", json.dumps({"timestamp": stamp, "temperature": 21}))], 1)


@pytest.mark.parametrize("schemas_enable", ["true", "false"])
def test_json_keys_are_jsonconverters_string_key(setup: Setup, schemas_enable: str) -> None:
    setup.proxy(
        OUTPUT__VALUE_FORMAT="json", OUTPUT__KEY_FORMAT="json", OUTPUT__KEY_SCHEMAS_ENABLE=schemas_enable,
        REGISTRY__URL=NO_REGISTRY,
    ).start()  # fmt: skip
    publish_one(setup, "dev-é1")
    (record,) = consume(setup.stack.bootstrap, setup.readings, expected=1, timeout=60)
    if schemas_enable == "true":
        assert record.key == '{"schema":{"type":"string","optional":false},"payload":"dev-é1"}'.encode()
    else:
        assert record.key == '"dev-é1"'.encode()
    assert json.loads(record.value)["payload"]["device_id"] == "dev-é1"  # the values as before


def test_avro_keys_read_back_through_the_registry(setup: Setup, registry_client: Any) -> None:
    setup.proxy(OUTPUT__KEY_FORMAT="avro").start()
    publish_one(setup, "dev-7")
    (record,) = setup.readings_in_kafka(expected=1, timeout=60)
    assert record.record is not None and record.record["device_id"] == "dev-7"  # the Avro value as before
    magic, schema_id = struct.unpack(">bI", record.key[:5])
    registered = registry_client.get_latest_version(f"{setup.readings}-key")
    assert (magic, json.loads(registered.schema.schema_str)) == (0, "string")
    writer = fastavro.parse_schema(json.loads(registry_client.get_schema(schema_id).schema_str))
    assert fastavro.schemaless_reader(io.BytesIO(record.key[5:]), writer) == "dev-7"
