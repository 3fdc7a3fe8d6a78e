"""The fields of ``TemperatureAggregate`` the Hazelcast persister relies on.

The default statement (``SELECT * ... STOREAS RING_BUFFER WITHFORMAT JSON``) writes whatever
record the aggregator sends as the JSON value, so the value itself asks for no field. What
the persister reads is the default PK, ``device_id``, ``metric`` and ``window_start`` (the
event time), which keys an IMap entry (``Sensor4|temperature|1486997160000``): without
them the router keys it by Kafka coordinates, so a replay would add a second entry for a
window instead of overwriting it. A field a reader of the Hazelcast values comes to rely
on belongs here too.

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
    }
)
"""Field name -> its Avro type in ``schemas/temperature_aggregate.avsc``, in schema order."""
