"""Payloads as devices send them: JSON objects, SenML JSON, SenML CBOR, and broken ones."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Literal

import cbor2

from fluxgate_sim.faults import Reading
from fluxgate_sim.signals import UNITS

CoapFormat = Literal["json", "senml-json", "senml-cbor"]
# CoAP Content-Format numbers (IANA): application/json, senml+json, senml+cbor.
CONTENT_FORMATS: dict[str, int] = {"json": 50, "senml-json": 110, "senml-cbor": 112}
# SenML CBOR labels (RFC 8428 section 6): bn -2, n 0, u 1, v 2, t 6.
_BN, _N, _U, _V, _T = -2, 0, 1, 2, 6


def json_object(reading: Reading) -> bytes:
    """``{"sensorId": "mqtt-0001", "timestamp": 1486997194029, "temperature": 23.6, "seq": 7}``."""
    document = {"sensorId": reading.device, "timestamp": reading.timestamp_ms, reading.metric: reading.value}
    document["seq"] = reading.seq
    return json.dumps(document, separators=(",", ":")).encode()


def senml_records(readings: Sequence[Reading]) -> list[dict[str, object]]:
    """SenML records of one device's readings; the base name ``<device>:`` names the device."""
    records: list[dict[str, object]] = []
    for index, reading in enumerate(readings):
        record: dict[str, object] = {"n": reading.metric, "u": UNITS[reading.metric], "v": reading.value}
        record["t"] = reading.timestamp_ms / 1000
        if index == 0:
            record = {"bn": f"{reading.device}:", **record}
        records.append(record)
    return records


def senml_json(readings: Sequence[Reading]) -> bytes:
    return json.dumps(senml_records(readings), separators=(",", ":")).encode()


def senml_cbor(readings: Sequence[Reading]) -> bytes:
    labels = {"bn": _BN, "n": _N, "u": _U, "v": _V, "t": _T}
    return bytes(cbor2.dumps([{labels[k]: v for k, v in record.items()} for record in senml_records(readings)]))


def coap_payload(reading: Reading, fmt: CoapFormat) -> bytes:
    """The payload a CoAP device serves for ``reading`` in content format ``fmt``."""
    if fmt == "json":
        return json_object(reading)
    if fmt == "senml-json":
        return senml_json([reading])
    return senml_cbor([reading])


def malformed(good: bytes, reading: Reading, fmt: str, rng: random.Random) -> bytes:
    """A broken variant of a payload: cut short, or with a value that is not a number."""
    if rng.random() < 0.5:
        # Cut inside the document so no parser can take it for a complete one.
        return good[: max(1, len(good) // 2)]
    text_value = rng.choice(["n/a", "NaN-ish", "", "23,5 °C"])
    if fmt == "senml-cbor":
        return bytes(cbor2.dumps([{_BN: f"{reading.device}:", _N: reading.metric, _V: text_value}]))
    if fmt == "senml-json":
        return json.dumps([{"bn": f"{reading.device}:", "n": reading.metric, "v": text_value}]).encode()
    document = {"sensorId": reading.device, "timestamp": reading.timestamp_ms, reading.metric: text_value}
    return json.dumps(document).encode()
