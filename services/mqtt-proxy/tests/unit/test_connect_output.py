"""The converter with Kafka Connect's JSON encoder: the same SensorReading the Avro path writes,
as a JsonConverter consumer reads it, its key (the device id, or WITHKEY's values) as the output's
key format says; what does not convert is still rejected for the dead letters."""

import json

import pytest

from fluxgate_core.errors import PayloadError
from fluxgate_core.gateway import with_key
from fluxgate_core.json_records import ConnectJsonEncoder, OutputSettings
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_mqtt_proxy.convert import MessageConverter
from fluxgate_mqtt_proxy.kcql import routes_from_kcql
from fluxgate_mqtt_proxy.route_settings import default_routes

NOW = 1_764_201_600_000


def converter(schemas_enable: bool) -> MessageConverter:
    return MessageConverter(default_routes(), ConnectJsonEncoder(schema_dict(SENSOR_READING), schemas_enable))


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_a_message_becomes_the_connect_json_of_its_reading(schemas_enable: bool) -> None:
    payload = json.dumps({"timestamp": NOW - 1000, "temperature": 21, "seq": 3}).encode()
    (record,) = converter(schemas_enable).convert("sensors/d1/temperature", payload, {"site": "lab"}, NOW)
    value = json.loads(record.value)
    if schemas_enable:
        assert value.keys() == {"schema", "payload"} and value["schema"]["name"] == "io.fluxgate.sensors.SensorReading"
        value = value["payload"]
    assert record.key == b"d1" and record.topic == "sensors.readings"
    assert value == {"device_id": "d1", "metric": "temperature", "value": 21.0, "unit": "Cel",
                     "event_time": NOW - 1000, "ingest_time": NOW, "source_protocol": "MQTT",
                     "source": "sensors/d1/temperature", "sequence": 3, "attributes": {"site": "lab"}}  # fmt: skip


def test_a_bad_payload_is_still_rejected() -> None:
    with pytest.raises(PayloadError):
        converter(True).convert("sensors/d1/temperature", b"{not json", {}, NOW)


def keyed_converter(kcql: str, key_schemas_enable: bool) -> MessageConverter:
    """The converter with the encoder the gateway's output makes of OUTPUT__KEY_FORMAT json."""
    output = OutputSettings(value_format="json", key_format="json", key_schemas_enable=key_schemas_enable)
    encoder = with_key(ConnectJsonEncoder(schema_dict(SENSOR_READING)), output)
    return MessageConverter(routes_from_kcql(kcql), encoder)


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_keys_are_written_as_the_output_says_the_device_or_withkeys_values(schemas_enable: bool) -> None:
    payload = json.dumps({"sensorId": "d1", "site": "lab", "temperature": 21}).encode()
    by_device = keyed_converter("INSERT INTO t SELECT * FROM s/+", schemas_enable)
    by_fields = keyed_converter(
        "INSERT INTO t SELECT * FROM s/+ WITHKEY(site, sensorId) KEYDELIMITER='-'", schemas_enable
    )
    for converter_, text in ((by_device, "d1"), (by_fields, "lab-d1")):
        (record,) = converter_.convert("s/x", payload, {}, NOW)
        key = json.loads(record.key)
        assert key == ({"schema": {"type": "string", "optional": False}, "payload": text} if schemas_enable else text)
