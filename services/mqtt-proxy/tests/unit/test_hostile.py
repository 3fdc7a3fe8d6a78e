"""The hostile-input table through the proxy's converter, plus the MQTT topic shapes."""

from __future__ import annotations

import io

import fastavro
import pytest
from fluxgate_testing.hostile import LIMITS, NOW, Case, cases

from fluxgate_core.errors import InvalidReading, PayloadError
from fluxgate_core.limits import PayloadLimits
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder
from fluxgate_mqtt_proxy.convert import MessageConverter
from fluxgate_mqtt_proxy.route_settings import RouteSettings

NOW_MS = 1_700_000_100_000
SCHEMA = schema_dict(SENSOR_READING)


def converter(fmt: str, limits: PayloadLimits = LIMITS) -> MessageConverter:
    route = RouteSettings(filter="sensors/+/+", device_from="topic:1", metric_from="topic:2", format=fmt)
    return MessageConverter([route], AvroEncoder(SCHEMA, schema_id=1), limits)


def readings(topic: str, payload: bytes, fmt: str = "auto", limits: PayloadLimits = LIMITS) -> list[tuple[object, ...]]:
    """What the proxy would produce, decoded back from the Avro bytes (5-byte wire header)."""
    parsed = fastavro.parse_schema(SCHEMA)
    out = []
    for record in converter(fmt, limits).convert(topic, payload, {}, NOW_MS):
        r: dict[str, object] = fastavro.schemaless_reader(io.BytesIO(record.value[5:]), parsed, None)  # type: ignore[assignment]
        when = round(r["event_time"].timestamp() * 1000)  # type: ignore[attr-defined]
        out.append((r["device_id"], r["metric"], r["value"], r["unit"], when))
    return out


def expected(case: Case) -> list[tuple[object, ...]]:
    return [(*reading[:4], NOW_MS if reading[4] == NOW else reading[4]) for reading in case.readings]


@pytest.mark.parametrize("case", cases(), ids=lambda case: case.name)
def test_hostile_payload(case: Case) -> None:
    if case.accepted:
        assert readings("sensors/dev-h/temperature", case.payload, case.fmt, case.limits) == expected(case)
        return
    with pytest.raises((PayloadError, InvalidReading)) as error:
        readings("sensors/dev-h/temperature", case.payload, case.fmt, case.limits)
    assert case.reason in str(error.value)


GOOD = b"21.5"
TOPICS = [
    ("sensors/dev-h", "no routing rule matches"),
    ("sensors", "no routing rule matches"),
    ("sensors/dev-h/temperature/extra", "no routing rule matches"),
    ("sensors//temperature", "no device id"),
    ("sensors/dev-h/", "no metric"),
    ("sensors/" + "d" * 300 + "/temperature", "over 256"),
    ("sensors/" + "d" * 70_000 + "/temperature", "over 256"),
    ("sensors/dev-h/" + "t" * 65, "not a valid metric name"),
    ("sensors/dev-h/température", "not a valid metric name"),
    ("sensors/dev-h/temp erature", "not a valid metric name"),
    ("other/dev-h/temperature", "no routing rule matches"),
    ("$SYS/dev-h/temperature", "no routing rule matches"),
]


@pytest.mark.parametrize(("topic", "reason"), TOPICS, ids=[topic[:40] for topic, _ in TOPICS])
def test_hostile_topic(topic: str, reason: str) -> None:
    with pytest.raises((PayloadError, InvalidReading)) as error:
        readings(topic, GOOD)
    assert reason in str(error.value)


@pytest.mark.parametrize(
    ("topic", "device", "metric"),
    [("sensors/水-1/temperature", "水-1", "temperature"), ("sensors/dev-h/TEMP", "dev-h", "temperature"),
     ("sensors/" + "d" * 256 + "/hum", "d" * 256, "humidity")],
)  # fmt: skip
def test_topic_shapes_accepted_exactly(topic: str, device: str, metric: str) -> None:
    assert readings(topic, GOOD) == [(device, metric, 21.5, {"temperature": "Cel", "humidity": "%RH"}[metric], NOW_MS)]
