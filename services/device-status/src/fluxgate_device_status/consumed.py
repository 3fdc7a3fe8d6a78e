"""The fields of ``SensorReading`` that device-status reads from ``sensors.readings``.

``device_id`` keys the table (and, as the record key, the partition); ``metric``,
``value`` and ``unit`` are the device's last value per metric; ``event_time`` and
``ingest_time`` say when it was last heard of (silence is judged on the ingest time);
``source_protocol`` and ``source`` say where it speaks from. ``device_state.Reading.from_record``
reads exactly these.

The consumer-driven contract (``tests/contract``) is written from this declaration and
verified against what mqtt-proxy and coap-ingest really encode (``contracts-tests/``), so
a gateway dropping or renaming one of these fields fails its own build, naming the field.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from fluxgate_core.contract import TIMESTAMP_MILLIS, ConsumedFields

CONSUMED_FIELDS: Final[ConsumedFields] = MappingProxyType(
    {
        "device_id": "string",
        "metric": "string",
        "value": "double",
        "unit": ["null", "string"],
        "event_time": TIMESTAMP_MILLIS,
        "ingest_time": TIMESTAMP_MILLIS,
        "source_protocol": {"type": "enum", "name": "SourceProtocol", "symbols": ["MQTT", "COAP"]},
        "source": "string",
    }
)
"""Field name -> its Avro type in ``schemas/sensor_reading.avsc``, in schema order (docs aside)."""
