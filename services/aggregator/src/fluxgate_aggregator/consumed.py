"""The fields of ``SensorReading`` that the aggregator reads from ``sensors.readings``.

The streaming job relies on exactly these fields and on nothing else a gateway writes:
``device_id`` keys the per-device windows, ``metric`` selects the configured metric,
``value`` feeds the statistics, ``unit`` is carried into the aggregate and
``event_time`` puts a reading in its windows, ``ingest_time`` (the gateway's clock) with it
gives each device's watermark, and ``sequence`` (with the device,
metric, event time and value) tells a redelivered copy of a reading from a new reading.

The consumer-driven contract (``services/aggregator/tests/contract``) is written from
this declaration and verified against what mqtt-proxy and coap-ingest really encode
(``contracts-tests/``). Reading another field in the job therefore means declaring it
here first, which is what makes the producers promise to keep it.
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
        # A device may not state a unit; the job passes null through to the aggregate.
        "unit": ["null", "string"],
        "event_time": TIMESTAMP_MILLIS,
        # The gateways' clock, stamped on receipt: what a device's clock is judged against
        # (decision 0011); no device sets it.
        "ingest_time": TIMESTAMP_MILLIS,
        # Part of a reading's identity when a device or transport numbers its readings.
        "sequence": ["null", "long"],
    }
)
"""Field name -> its Avro type in ``schemas/sensor_reading.avsc``, in schema order."""

IDENTITY: Final = ("device_id", "metric", "event_time", "value", "sequence")
"""What makes two records the same reading. The gateways are at-least-once (QoS 1
redelivery, a proxy restart, a CoAP re-registration, a device resending), so the same
reading can arrive twice; two different values at the same millisecond are two readings."""

IDENTITY_IN_METRIC: Final = tuple(name for name in IDENTITY if name != "metric")
""":data:`IDENTITY` among the readings of one metric, as the job's ledger holds them."""
