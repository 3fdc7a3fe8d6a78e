"""The Connect schemas our records have when a gateway writes them as Kafka Connect's JsonConverter
(``OUTPUT__VALUE_FORMAT=json``, ``fluxgate_core.json_records``), written out by hand, as a
JsonConverter consumer reads them: the tests of the encoder and of each gateway compare against
this one copy, not against what the code under test derives from the ``.avsc``."""

from __future__ import annotations

from typing import Any

# Avro's timestamp-millis as Connect names it: int64 epoch milliseconds.
CONNECT_TIMESTAMP: dict[str, Any] = {
    "type": "int64",
    "optional": False,
    "name": "org.apache.kafka.connect.data.Timestamp",
    "version": 1,
}
# schemas/sensor_reading.avsc, its fields in order (the doc strings left out, as the encoder does).
SENSOR_READING_CONNECT_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "device_id"},
        {"type": "string", "optional": False, "field": "metric"},
        {"type": "float64", "optional": False, "field": "value"},
        {"type": "string", "optional": True, "field": "unit"},
        {**CONNECT_TIMESTAMP, "field": "event_time"},
        {**CONNECT_TIMESTAMP, "field": "ingest_time"},
        {"type": "string", "optional": False, "field": "source_protocol"},
        {"type": "string", "optional": False, "field": "source"},
        {"type": "int64", "optional": True, "field": "sequence"},
        {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": {"type": "string", "optional": False},
            "optional": False,
            "default": {},
            "field": "attributes",
        },
    ],
    "optional": False,
    "name": "io.fluxgate.sensors.SensorReading",
}
