import json
import math
import time

import cbor2
import pytest

from fluxgate_core.errors import PayloadError
from fluxgate_core.payloads import (
    CF_SENML_CBOR,
    CF_SENML_JSON,
    JsonFields,
    Measurement,
    format_for_content_format,
    parse_payload,
    parse_time,
)


def test_stream_reactor_style_object_gives_one_measurement_per_numeric_field() -> None:
    payload = b'{"sensorId":"Sensor4","timestamp":1486997194029,"temperature":23.6}'
    assert parse_payload(payload) == [
        Measurement(value=23.6, metric="temperature", time_ms=1486997194029, device_id="Sensor4")
    ]


def test_object_with_several_metrics_and_string_attributes() -> None:
    payload = json.dumps({"sensorId": "d1", "temperature": 21, "humidity": 40.5, "room": "kitchen", "seq": 7})
    got = parse_payload(payload.encode())
    assert [(m.metric, m.value, m.sequence) for m in got] == [("temperature", 21.0, 7), ("humidity", 40.5, 7)]
    assert all(m.attributes == {"room": "kitchen"} for m in got)


def test_value_and_metric_fields_and_custom_names() -> None:
    fields = JsonFields(device="id", time="ts", value="v", metric="kind")
    got = parse_payload(b'{"id":"x","ts":"2024-01-02T03:04:05Z","kind":"humidity","v":55}', "json", fields)
    assert got == [Measurement(value=55.0, metric="humidity", time_ms=1704164645000, device_id="x")]


def test_bare_number() -> None:
    assert parse_payload(b"23.5") == [Measurement(value=23.5)]
    assert parse_payload(b" -4 ", "number") == [Measurement(value=-4.0)]


def test_senml_json_resolves_base_fields() -> None:
    pack = [
        {"bn": "urn:dev:ow:10e2073a01080063:", "bt": 1.320067464e09, "bu": "Cel", "n": "temp", "v": 23.1},
        {"n": "temp", "t": 60, "v": 23.4},
        {"n": "hum", "u": "%RH", "v": 40},
    ]
    got = parse_payload(json.dumps(pack).encode())
    assert [(m.device_id, m.metric, m.value, m.unit, m.time_ms) for m in got] == [
        ("urn:dev:ow:10e2073a01080063", "temp", 23.1, "Cel", 1320067464000),
        ("urn:dev:ow:10e2073a01080063", "temp", 23.4, "Cel", 1320067524000),
        ("urn:dev:ow:10e2073a01080063", "hum", 40.0, "%RH", 1320067464000),
    ]


def test_senml_relative_time_is_relative_to_now() -> None:
    got = parse_payload(b'[{"n":"dev/temperature","v":1,"t":-10}]', "senml")
    assert got[0].device_id == "dev" and got[0].metric == "temperature"
    assert abs(got[0].time_ms - (time.time() - 10) * 1000) < 5000


def test_senml_cbor_with_integer_labels() -> None:
    pack = [{-2: "dev-9:", -3: 1.7e9, -4: "lx", 0: "brightness", 2: 310.5}]
    got = parse_payload(cbor2.dumps(pack), format_for_content_format(CF_SENML_CBOR))
    assert got == [
        Measurement(value=310.5, metric="brightness", unit="lx", time_ms=1_700_000_000_000, device_id="dev-9")
    ]


def test_cbor_map_behaves_like_json_object() -> None:
    got = parse_payload(cbor2.dumps({"sensorId": "c1", "temperature": 19.25}), "cbor")
    assert got == [Measurement(value=19.25, metric="temperature", device_id="c1")]


@pytest.mark.parametrize(
    ("payload", "fmt", "message"),
    [
        (b"{not json", "auto", "not valid JSON"),
        (b"\xff\xfe", "auto", "not UTF-8"),
        (b'{"sensorId":"a","status":"ok"}', "auto", "no numeric field"),
        (b'"hello"', "auto", "unsupported payload"),
        (b"[]", "auto", "empty SenML pack"),
        (b'[{"n":"a","vs":"text"}]', "auto", "no numeric value"),
        (b'{"sensorId":"a","temperature":NaN}', "auto", "not finite"),
        (b'{"sensorId":"a","timestamp":"yesterday","t":1}', "auto", "not an ISO-8601 time"),
        (b'{"a":1}', "number", "expected a bare number"),
        (b'{"a":1}', "senml", "expected a SenML pack"),
        (b"\x9f", "cbor", "not valid CBOR"),
        (cbor2.dumps({"a": 1}), "senml-cbor", "expected a SenML pack"),
    ],
)
def test_bad_payloads_say_what_is_wrong(payload: bytes, fmt: str, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        parse_payload(payload, fmt)


def test_times_in_seconds_or_milliseconds() -> None:
    assert parse_time(1486997194, "t") == 1486997194000
    assert parse_time(1486997194.5, "t") == 1486997194500
    assert parse_time(1486997194029, "t") == 1486997194029


def test_content_format_selects_parser() -> None:
    assert format_for_content_format(CF_SENML_JSON) == "senml"
    assert format_for_content_format(None) == "auto"
    assert format_for_content_format(50) == "auto"
    assert not math.isnan(parse_payload(b"1")[0].value)
