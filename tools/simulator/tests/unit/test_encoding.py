"""Payloads parse (with the gateways' own parser) to exactly the simulated readings; broken ones never do."""

from __future__ import annotations

import json
import random

import pytest

from fluxgate_core.errors import PayloadError
from fluxgate_core.payloads import parse_payload
from fluxgate_sim.encoding import coap_payload, json_object, malformed, senml_cbor, senml_json
from fluxgate_sim.faults import Reading

READING = Reading("coap-0001", "temperature", 21.37, 1_700_000_000_123, 42)


def test_json_object_shape() -> None:
    assert json.loads(json_object(READING)) == {
        "sensorId": "coap-0001",
        "timestamp": 1_700_000_000_123,
        "temperature": 21.37,
        "seq": 42,
    }
    (measurement,) = parse_payload(json_object(READING))
    assert (measurement.device_id, measurement.metric, measurement.value) == ("coap-0001", "temperature", 21.37)
    assert (measurement.time_ms, measurement.sequence) == (1_700_000_000_123, 42)


@pytest.mark.parametrize(("encode", "fmt"), [(senml_json, "senml"), (senml_cbor, "senml-cbor")])
def test_senml_packs_carry_device_metric_unit_and_time(encode: object, fmt: str) -> None:
    humidity = Reading("coap-0001", "humidity", 40.5, 1_700_000_000_123, 43)
    measurements = parse_payload(encode([READING, humidity]), fmt)  # type: ignore[operator, arg-type]
    assert [(m.device_id, m.metric, m.value, m.unit, m.time_ms) for m in measurements] == [
        ("coap-0001", "temperature", 21.37, "Cel", 1_700_000_000_123),
        ("coap-0001", "humidity", 40.5, "%RH", 1_700_000_000_123),
    ]


@pytest.mark.parametrize(("fmt", "parser"), [("json", "auto"), ("senml-json", "senml"), ("senml-cbor", "senml-cbor")])
def test_malformed_payloads_never_parse(fmt: str, parser: str) -> None:
    rng = random.Random(3)
    for _ in range(50):
        good = coap_payload(READING, fmt)
        with pytest.raises(PayloadError):
            parse_payload(malformed(good, READING, fmt, rng), parser)
