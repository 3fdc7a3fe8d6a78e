"""TemperatureAggregates as the sink runtime hands them to a persister: decoded, timestamps as
aware datetimes (as fastavro gives them). Every test that writes aggregates starts here and
says only what its own record changes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any


def temperature_aggregate(device_id: str, window_start: datetime, /, **changes: Any) -> dict[str, Any]:
    """A one-minute window of ``device_id``'s temperature from ``window_start``: three readings,
    20.5 to 22.5 °C, first and last at the window's start; ``changes`` replace any field."""
    return {
        "device_id": device_id,
        "metric": "temperature",
        "window_start": window_start,
        "window_end": window_start + timedelta(minutes=1),
        "count": 3,
        "min": 20.5,
        "max": 22.5,
        "mean": 21.5,
        "stddev": 0.8,
        "first_event_time": window_start,
        "last_event_time": window_start,
        "unit": "Cel",
        **changes,
    }
