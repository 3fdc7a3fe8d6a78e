"""The fields of ``TemperatureAggregate`` the Elasticsearch persister relies on.

``device_id``, ``metric`` and ``window_start`` make the document id; ``window_start``
dates the daily index; every field here has an explicit type in the index template
(``mapping.TEMPERATURE_AGGREGATE_PROPERTIES``), which dashboards and queries rely on.

The consumer-driven contract (``tests/contract``) is written from this declaration and
the aggregator verifies it against bytes its real Spark encoding produces, so renaming or
dropping one of these fields fails the aggregator's build, naming the field.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from fluxgate_sink.contract import TIMESTAMP_MILLIS, ConsumedFields

CONSUMED_FIELDS: Final[ConsumedFields] = MappingProxyType(
    {
        "device_id": "string",
        "metric": "string",
        "window_start": TIMESTAMP_MILLIS,
        "window_end": TIMESTAMP_MILLIS,
        "count": "long",
        "min": "double",
        "max": "double",
        "mean": "double",
        "stddev": "double",
        "first_event_time": TIMESTAMP_MILLIS,
        "last_event_time": TIMESTAMP_MILLIS,
        "unit": ["null", "string"],
    }
)
"""Field name -> its Avro type in ``schemas/temperature_aggregate.avsc``, in schema order."""
