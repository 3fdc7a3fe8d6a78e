"""What an MQTT source config with JsonConverter (or StringConverter) has mqtt-proxy write reads
back, through the sink runtime's reading of the same converter, as the record the Avro path writes:
a Fluxgate sink (or any JsonConverter consumer) downstream of such a source gets every field, and
the record key (key.converter StringConverter or JsonConverter) reads back as its text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fluxgate_core.gateway import with_key
from fluxgate_core.json_records import connect_encoder
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_mqtt_proxy.settings import ProxySettings
from fluxgate_sink.formats import ConnectJsonDecoder, key_reader

READING = {"device_id": "d1", "metric": "temperature", "value": 21.5, "unit": "Cel", "event_time": 1_764_201_600_000,
           "ingest_time": 1_764_201_600_250, "source_protocol": "MQTT", "source": "sensors/d1/temperature",
           "sequence": None, "attributes": {"site": "lab"}}  # fmt: skip


@pytest.mark.parametrize(
    ("output", "decoder"),
    [
        ({"value_format": "json", "value_schemas_enable": True}, ConnectJsonDecoder(True)),
        ({"value_format": "json", "value_schemas_enable": False}, ConnectJsonDecoder(False)),
        ({"value_format": "string"}, ConnectJsonDecoder(False, text=True)),
    ],
)
def test_what_the_source_writes_the_sinks_read(output: dict[str, object], decoder: ConnectJsonDecoder) -> None:
    settings = ProxySettings.model_validate({"output": output})
    got = decoder.decode(connect_encoder(settings.output, schema_dict(SENSOR_READING)).encode(READING))
    if decoder.schemas_enable:  # through the schema: a Timestamp is a datetime, as from Avro
        assert got["event_time"] == datetime.fromtimestamp(1_764_201_600, UTC)
        got = {**got, "event_time": READING["event_time"], "ingest_time": READING["ingest_time"]}
    assert got == READING


@pytest.mark.parametrize(
    ("output", "reading"),
    [
        ({}, ("string", True)),  # StringConverter's text, the default
        ({"key_format": "json", "key_schemas_enable": True}, ("json", True)),
        ({"key_format": "json", "key_schemas_enable": False}, ("json", False)),
    ],
)
@pytest.mark.parametrize("key", ["d1", "lab|d1", 'a "quoted" clé'])
def test_the_keys_the_source_writes_the_sinks_read(
    output: dict[str, object], reading: tuple[Any, bool], key: str
) -> None:
    """The sink runtime's reading of the same key.converter (a KCQL PK of _key) gives back the key's text."""
    settings = ProxySettings.model_validate({"output": {"value_format": "json", **output}})
    encoder = with_key(connect_encoder(settings.output, schema_dict(SENSOR_READING)), settings.output)
    assert key_reader(*reading)(encoder.encode_key(key)) == key
