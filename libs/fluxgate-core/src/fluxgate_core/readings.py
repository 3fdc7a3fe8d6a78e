"""Turn a parsed :class:`Measurement` plus what the transport knows into a ``SensorReading``.

The payload wins over the transport for what it states (device, metric, time); the
routing context fills the gaps. Validation happens here, once, for both gateways.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from fluxgate_core.errors import InvalidReading
from fluxgate_core.payloads import NO_ATTRIBUTES, Measurement

Protocol = Literal["MQTT", "COAP"]
MIN_EVENT_TIME_MS = 946_684_800_000  # 2000-01-01: earlier means an unset device clock
MAX_FUTURE_SKEW_MS = 24 * 3600 * 1000
_METRIC = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")
_METRIC_ALIASES = {"temp": "temperature", "t": "temperature", "hum": "humidity", "rh": "humidity",
                   "lux": "brightness", "light": "brightness", "illuminance": "brightness"}  # fmt: skip
_DEFAULT_UNITS = {"temperature": "Cel", "humidity": "%RH", "brightness": "lx"}
MAX_DEVICE_ID_CHARS = 256  # a Kafka key and a document id downstream, not a place for a payload
# Control characters (NUL included) and lone surrogates: invisible in logs, or not encodable.
_BAD_DEVICE_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class Origin(NamedTuple):
    """What the transport knows about a message, independent of its payload."""

    protocol: Protocol
    source: str
    ingest_time_ms: int
    device_id: str | None = None
    metric: str | None = None
    sequence: int | None = None
    attributes: Mapping[str, str] = NO_ATTRIBUTES


def build_reading(measurement: Measurement, origin: Origin) -> dict[str, Any]:
    """A ``SensorReading`` record (as a dict for the Avro encoder), or :class:`InvalidReading`."""
    # Called once per reading: the checks of what is usual are inlined (a call costs as much).
    device_id = measurement.device_id or origin.device_id
    if device_id not in _known_devices:  # devices send again and again: each id is checked once
        device_id = _checked_device(device_id, origin.source)
    metric = measurement.metric or origin.metric
    metric = _normalised(metric) if type(metric) is str else _normalise(metric)
    if not math.isfinite(measurement.value):
        raise InvalidReading(f"value {measurement.value} of {metric} is not finite")
    event_time = measurement.time_ms if measurement.time_ms is not None else origin.ingest_time_ms
    if not MIN_EVENT_TIME_MS <= event_time <= origin.ingest_time_ms + MAX_FUTURE_SKEW_MS:
        _check_event_time(event_time, origin.ingest_time_ms)
    sequence = measurement.sequence if measurement.sequence is not None else origin.sequence
    if sequence is not None and not _LONG_MIN <= sequence <= _LONG_MAX:
        raise InvalidReading(f"sequence {sequence} does not fit a 64-bit integer")
    return {
        "device_id": device_id,
        "metric": metric,
        "value": measurement.value,
        "unit": measurement.unit or _DEFAULT_UNITS.get(metric),
        "event_time": event_time,
        "ingest_time": origin.ingest_time_ms,
        "source_protocol": origin.protocol,
        "source": origin.source,
        "sequence": sequence,
        "attributes": {**origin.attributes, **measurement.attributes},
    }


def _checked_device(device_id: str | None, source: str) -> str:
    if not device_id:
        raise InvalidReading(f"no device id in payload or routing rule for {source[:256]}")
    if len(device_id) > MAX_DEVICE_ID_CHARS:
        raise InvalidReading(f"device id is {len(device_id)} characters long, over {MAX_DEVICE_ID_CHARS}")
    if _BAD_DEVICE_CHARS.search(device_id):
        raise InvalidReading(f"device id {device_id!r} has a control character or a lone surrogate")
    if len(_known_devices) >= KNOWN_DEVICES:
        _known_devices.clear()
    _known_devices.add(device_id)
    return device_id


KNOWN_DEVICES = 65_536  # valid device ids remembered; forgotten all at once when full
_known_devices: set[str] = set()


def normalise_metric(metric: str | None) -> str:
    """The metric's canonical name (lower case, aliases resolved), or :class:`InvalidReading`."""
    return _normalised(metric) if type(metric) is str else _normalise(metric)


@functools.lru_cache(maxsize=4096)
def _normalised(metric: str) -> str:
    # A handful of names arrive millions of times; an invalid one raises, and is not cached.
    return _normalise(metric)


def _normalise(metric: str | None) -> str:
    if not metric:
        raise InvalidReading("no metric in payload or routing rule")
    name = metric.strip().lower()
    name = _METRIC_ALIASES.get(name, name)
    if not _METRIC.match(name):
        raise InvalidReading(f"metric name {metric!r} is not a valid metric name")
    return name


def _check_event_time(event_time: int, ingest_time: int) -> None:
    if event_time < MIN_EVENT_TIME_MS:
        raise InvalidReading(f"event time {event_time} ms is before the year 2000 (device clock unset?)")
    if event_time > ingest_time + MAX_FUTURE_SKEW_MS:
        raise InvalidReading(f"event time {event_time} ms is more than a day ahead of ingest time {ingest_time}")
