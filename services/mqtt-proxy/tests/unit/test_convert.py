import io
import json

import cbor2
import fastavro
import pytest

from fluxgate_core.errors import InvalidReading, PayloadError
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder, wire_schema_id
from fluxgate_mqtt_proxy.convert import MessageConverter, NoRoute
from fluxgate_mqtt_proxy.route_settings import RouteSettings, default_routes

NOW = 1_700_000_000_000
PARSED = fastavro.parse_schema(schema_dict(SENSOR_READING))


def converter(routes: list[RouteSettings] | None = None) -> MessageConverter:
    return MessageConverter(routes or default_routes(), AvroEncoder(schema_dict(SENSOR_READING), schema_id=7))


def decode(value: bytes) -> dict[str, object]:
    assert wire_schema_id(value) == 7
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), PARSED, None)
    assert isinstance(record, dict)
    return record


def test_stream_reactor_style_json_on_the_default_route() -> None:
    payload = b'{"sensorId":"Sensor4","timestamp":1700000000123,"temperature":23.6,"seq":9}'
    (record,) = converter().convert("sensors/Sensor4/temperature", payload, {"fw": "1.2"}, NOW)
    assert (record.topic, record.key) == ("sensors.readings", b"Sensor4")
    assert record.headers == [("mqtt.topic", b"sensors/Sensor4/temperature"), ("mqtt.user.fw", b"1.2")]
    reading = decode(record.value)
    assert {k: reading[k] for k in ("device_id", "metric", "value", "unit", "sequence", "source", "attributes")} == {
        "device_id": "Sensor4",
        "metric": "temperature",
        "value": 23.6,
        "unit": "Cel",
        "sequence": 9,
        "source": "sensors/Sensor4/temperature",
        "attributes": {"fw": "1.2"},
    }
    assert reading["source_protocol"] == "MQTT"
    assert int(reading["event_time"].timestamp() * 1000) == 1700000000123  # type: ignore[attr-defined]
    assert int(reading["ingest_time"].timestamp() * 1000) == NOW  # type: ignore[attr-defined]


def test_bare_number_takes_device_and_metric_from_the_topic() -> None:
    (record,) = converter().convert("sensors/d9/humidity", b"41.5", {}, NOW)
    reading = decode(record.value)
    assert (reading["device_id"], reading["metric"], reading["value"], reading["unit"]) == (
        "d9",
        "humidity",
        41.5,
        "%RH",
    )
    assert int(reading["event_time"].timestamp() * 1000) == NOW  # type: ignore[attr-defined]


def test_senml_pack_gives_one_record_per_value() -> None:
    pack = [{"bn": "dev-5:", "bt": 1.7e9, "n": "temperature", "u": "Cel", "v": 20.5}, {"n": "humidity", "v": 33}]
    records = converter().convert("devices/dev-5/senml", json.dumps(pack).encode(), {}, NOW)
    assert [(decode(r.value)["metric"], decode(r.value)["value"]) for r in records] == [
        ("temperature", 20.5),
        ("humidity", 33.0),
    ]
    assert {r.key for r in records} == {b"dev-5"}


def test_cbor_route_with_custom_fields_and_topic() -> None:
    route = RouteSettings(
        filter="plant/+/cbor", topic="plant.readings", device_from="topic:1", metric_from="const:brightness",
        format="cbor", fields={"value": "v"},
    )  # fmt: skip
    (record,) = converter([route]).convert("plant/p1/cbor", cbor2.dumps({"v": 300}), {}, NOW)
    assert record.topic == "plant.readings"
    assert (decode(record.value)["metric"], decode(record.value)["device_id"]) == ("brightness", "p1")


def test_bad_input_raises_for_the_dead_letter_path() -> None:
    with pytest.raises(PayloadError):
        converter().convert("sensors/d/temperature", b"{broken", {}, NOW)
    with pytest.raises(InvalidReading, match="no device id"):
        converter([RouteSettings(filter="x/+", metric_from="topic:1")]).convert("x/temperature", b"1", {}, NOW)
    with pytest.raises(NoRoute, match="no routing rule matches"):
        converter().convert("elsewhere", b"1", {}, NOW)


def test_device_from_a_named_payload_field_and_metrics_from_object_keys() -> None:
    route = RouteSettings(filter="fleet/#", device_from="payload:serial")
    payload = b'{"serial":"SN-1","timestamp":1700000000000,"temperature":20.5,"humidity":40,"room":"b12"}'
    records = converter([route]).convert("fleet/x", payload, {}, NOW)
    readings = sorted((decode(r.value) for r in records), key=lambda reading: str(reading["metric"]))
    assert [(r["device_id"], r["metric"], r["value"]) for r in readings] == [
        ("SN-1", "humidity", 40.0),
        ("SN-1", "temperature", 20.5),
    ]
    assert all(r["attributes"] == {"room": "b12"} for r in readings)
    assert {r.key for r in records} == {b"SN-1"}


def test_payload_device_wins_over_the_topic_level() -> None:
    payload = b'{"sensorId":"payload-dev","temperature":1}'
    (record,) = converter().convert("sensors/topic-dev/temperature", payload, {}, NOW)
    assert decode(record.value)["device_id"] == "payload-dev"
    assert record.key == b"payload-dev"


def test_senml_cbor_with_device_from_the_base_name() -> None:
    route = RouteSettings(filter="cb/+", format="senml-cbor")
    pack = cbor2.dumps([{-2: "urn:dev:42:", 0: "temp", 2: 19.25, 6: 1.7e9}])
    (record,) = converter([route]).convert("cb/x", pack, {}, NOW)
    reading = decode(record.value)
    assert (reading["device_id"], reading["metric"], reading["value"]) == ("urn:dev:42", "temperature", 19.25)
    assert int(reading["event_time"].timestamp()) == 1_700_000_000  # type: ignore[attr-defined]


def test_user_properties_become_prefixed_headers_and_bare_attributes() -> None:
    (record,) = converter().convert("sensors/d1/temperature", b"20", {"site": "lab", "fw": "2"}, NOW)
    assert record.headers == [
        ("mqtt.topic", b"sensors/d1/temperature"),
        ("mqtt.user.site", b"lab"),
        ("mqtt.user.fw", b"2"),
    ]
    assert decode(record.value)["attributes"] == {"site": "lab", "fw": "2"}


def test_a_user_property_can_never_be_a_reserved_or_a_gateway_header() -> None:
    props = {"fluxgate.dlq.topic": "temperatures.aggregated", "mqtt.topic": "elsewhere", "fluxgate.replay.of": "x"}
    (record,) = converter().convert("sensors/d1/temperature", b"20", props, NOW)
    names = [name for name, _ in record.headers]
    prefixed = ["mqtt.user.fluxgate.dlq.topic", "mqtt.user.mqtt.topic", "mqtt.user.fluxgate.replay.of"]
    assert names == ["mqtt.topic", *prefixed]
    assert dict(record.headers)["mqtt.topic"] == b"sensors/d1/temperature"


def test_format_mismatch_is_a_payload_error() -> None:
    route = RouteSettings(filter="n/+", device_from="topic:1", metric_from="const:temperature", format="number")
    with pytest.raises(PayloadError, match="bare number"):
        converter([route]).convert("n/d", b'{"temperature": 1}', {}, NOW)
    (record,) = converter([route]).convert("n/d", b"12.5", {}, NOW)
    assert decode(record.value)["metric"] == "temperature"


def test_event_time_in_the_far_future_is_an_invalid_reading() -> None:
    payload = json.dumps({"sensorId": "d", "timestamp": NOW + 3 * 86_400_000, "temperature": 1}).encode()
    with pytest.raises(InvalidReading, match="ahead of ingest time"):
        converter().convert("sensors/d/temperature", payload, {}, NOW)


def test_messages_of_one_topic_share_an_origin_only_within_one_ingest_time() -> None:
    convert = converter().convert
    payload = b'{"sensorId":"Sensor4","timestamp":1700000000123,"temperature":23.6}'
    topic = "sensors/Sensor4/temperature"
    records = [
        convert(topic, payload, {}, NOW),
        convert(topic, payload, {"fw": "2"}, NOW),  # user properties: its own origin, not the shared one
        convert(topic, payload, {}, NOW),
        convert(topic, payload, {}, NOW + 1000),  # the next batch
        convert("sensors/d5/temperature", payload, {}, NOW + 1000),
    ]
    readings = [decode(record.value) for (record,) in records]
    assert [int(r["ingest_time"].timestamp() * 1000) for r in readings] == [NOW] * 3 + [NOW + 1000] * 2  # type: ignore[attr-defined]
    assert [r["attributes"] for r in readings] == [{}, {"fw": "2"}, {}, {}, {}]
    assert [r["source"] for r in readings] == [topic] * 4 + ["sensors/d5/temperature"]


def test_string_fields_cannot_multiply_a_message_past_the_output_limit() -> None:
    # Every string field is an attribute of every reading: 50 KB x 100 readings is 5 MB of
    # records from one 51 KB message, over the 1 MiB a message may produce by default.
    payload = json.dumps({"sensorId": "d1", "note": "x" * 50_000, **{f"m{i}": i for i in range(100)}}).encode()
    with pytest.raises(PayloadError, match=r"over the limit of 1048576 bytes .* per message"):
        converter().convert("sensors/d1/temperature", payload, {}, NOW)


def test_user_properties_cannot_multiply_a_message_past_the_output_limit() -> None:
    # User properties are outside the payload limit, and go into every record twice
    # (header and attribute): 300 KB of them on a two-reading message is over 1 MiB.
    payload = json.dumps({"sensorId": "d1", "temperature": 1, "humidity": 2}).encode()
    with pytest.raises(PayloadError, match="over the limit of 1048576 bytes"):
        converter().convert("sensors/d1/temperature", payload, {"big": "y" * 300_000}, NOW)


def test_a_message_within_the_output_limit_is_produced_whole() -> None:
    payload = json.dumps({"sensorId": "d1", "note": "x" * 5_000, **{f"m{i}": i for i in range(100)}}).encode()
    assert len(converter().convert("sensors/d1/temperature", payload, {}, NOW)) == 100
