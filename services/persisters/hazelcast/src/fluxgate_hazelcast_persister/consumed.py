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

COAP_MESSAGE_FIELDS: Final[ConsumedFields] = MappingProxyType(
    {
        "ingest_time": ["null", "long"],
        "message_id": ["null", "int"],
        "type": ["null", "string"],
        "code": ["null", "string"],
        "raw_code": ["null", "int"],
        "source": ["null", "string"],
        "token": ["null", "string"],
        "content_format": ["null", "int"],
        "observe": ["null", "int"],
        "payload": "bytes",
    }
)
"""The fields of coap-ingest's ``CoapMessage`` (``schemas/coap_message.avsc``) that readers of the
Hazelcast values rely on, moving from Stream-Reactor's CoAP source and Hazelcast sink (``INSERT
INTO dev SELECT * FROM coap_sensor_topic WITHFORMAT JSON STOREAS QUEUE``): what the server
answered (code, payload), to which request and when (token, message id, observe number,
ingest time). ``SELECT *`` into a queue keys nothing, so the persister itself needs none of them;
``payload`` is bytes, base64 in the JSON value (``values``)."""
