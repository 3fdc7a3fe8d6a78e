import pytest

from fluxgate_core.errors import InvalidReading
from fluxgate_core.payloads import Measurement
from fluxgate_core.readings import Origin, build_reading

NOW = 1_700_000_000_000


def origin(**overrides: object) -> Origin:
    base: dict[str, object] = {"protocol": "MQTT", "source": "sensors/d1/temperature", "ingest_time_ms": NOW}
    base.update(overrides)
    return Origin(**base)


def test_payload_wins_over_routing_context_and_defaults_fill_in() -> None:
    reading = build_reading(
        Measurement(value=21.5, metric="temp", device_id="from-payload", time_ms=NOW - 5),
        origin(device_id="from-topic", metric="humidity", attributes={"a": "1"}, sequence=3),
    )
    assert reading == {
        "device_id": "from-payload",
        "metric": "temperature",
        "value": 21.5,
        "unit": "Cel",
        "event_time": NOW - 5,
        "ingest_time": NOW,
        "source_protocol": "MQTT",
        "source": "sensors/d1/temperature",
        "sequence": 3,
        "attributes": {"a": "1"},
    }


def test_context_fills_device_metric_and_event_time() -> None:
    reading = build_reading(Measurement(value=1.0), origin(device_id="d1", metric="Brightness"))
    assert (reading["device_id"], reading["metric"], reading["event_time"], reading["unit"]) == (
        "d1",
        "brightness",
        NOW,
        "lx",
    )


@pytest.mark.parametrize(
    ("measurement", "context", "message"),
    [
        (Measurement(value=1.0, metric="temperature"), {}, "no device id"),
        (Measurement(value=1.0, device_id="d"), {}, "no metric"),
        (Measurement(value=1.0, device_id="d", metric="bad metric!"), {}, "not a valid metric name"),
        (Measurement(value=float("inf"), device_id="d", metric="t"), {}, "not finite"),
        (Measurement(value=1.0, device_id="d", metric="t", time_ms=5), {}, "before the year 2000"),
        (Measurement(value=1.0, device_id="d", metric="t", time_ms=NOW + 2 * 86_400_000), {}, "a day ahead"),
    ],
)
def test_invalid_readings_are_explained(measurement: Measurement, context: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidReading, match=message):
        build_reading(measurement, origin(**context))
