"""One CoAP notification into ``SensorReading`` records, with no I/O.

The same converter runs in the service and in the consumer-driven contract tests, so
what the tests promise to the aggregator is exactly what the gateway produces.

Rules:

* the parser follows the resource's ``payload_format`` when set, otherwise the
  notification's Content-Format (JSON, SenML-JSON 110, CBOR 60, SenML-CBOR 112);
* the payload wins for what it states (device, metric, time, ``seq``); the resource's
  ``device_id``/``metric`` (or ``device_from``/``metric_from`` path levels) fill the gaps;
* ``sequence`` is the payload's own ``seq``, or null: never the CoAP observe number.
  That number belongs to one registration (24 bits, wrapping, new with every
  re-registration), so the same reading replayed after a re-registration would carry
  another one, and the aggregator, whose duplicate identity includes ``sequence``,
  would count it twice;
* ``source`` is the resource URI; the Kafka key is the device id, as the encoder writes keys
  (``OUTPUT__KEY_FORMAT``: UTF-8 text by default).
"""

from __future__ import annotations

from dataclasses import dataclass

from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.limits import DEFAULT_LIMITS, PayloadLimits
from fluxgate_core.payloads import JsonFields, Measurement, PayloadFormat, format_for_content_format, parse_payload
from fluxgate_core.readings import Origin, build_reading
from fluxgate_core.serde import RecordEncoder

DEFAULT_FIELDS = JsonFields()


@dataclass(frozen=True, slots=True)
class Conversion:
    """The records of one notification, and whether the device stamped every reading."""

    records: list[KafkaRecord]
    device_timed: bool


class NotificationConverter:
    """Converts the notifications of one resource; raises PayloadError / InvalidReading."""

    def __init__(
        self,
        resource: ResourceSettings,
        encoder: RecordEncoder,
        fields: JsonFields = DEFAULT_FIELDS,
        limits: PayloadLimits = DEFAULT_LIMITS,
    ) -> None:
        self.resource = resource
        self.limits = limits
        self._encoder = encoder
        self._fields = fields
        self._device = resource.routed_device()
        self._metric = resource.routed_metric()

    def convert(self, uri: str, payload: bytes, content_format: int | None, now_ms: int) -> list[KafkaRecord]:
        """The Kafka records for one notification of resource ``uri``."""
        return self.conversion(uri, payload, content_format, now_ms).records

    def conversion(self, uri: str, payload: bytes, content_format: int | None, now_ms: int) -> Conversion:
        """Like :meth:`convert`, also telling whether the payload carried its own times."""
        measurements = parse_payload(payload, self.payload_format(content_format), self._fields, self.limits)
        origin = Origin(
            protocol="COAP",
            source=uri,
            ingest_time_ms=now_ms,
            device_id=self._device,
            metric=self._metric,
        )
        records: list[KafkaRecord] = []
        produced = 0
        for measurement in measurements:
            record = self._record(measurement, origin)
            # String fields are copied into every reading: what one notification produces is bounded too.
            produced += len(record.value) + len(record.key or b"")
            self.limits.check_output(produced, len(records) + 1)
            records.append(record)
        return Conversion(records, all(m.time_ms is not None for m in measurements))

    def payload_format(self, content_format: int | None) -> PayloadFormat:
        if self.resource.payload_format != "auto":
            return self.resource.payload_format
        return format_for_content_format(content_format)

    def _record(self, measurement: Measurement, origin: Origin) -> KafkaRecord:
        reading = build_reading(measurement, origin)
        value = self._encoder.encode(reading)
        return KafkaRecord(
            topic=self.resource.topic, key=self._encoder.encode_key(str(reading["device_id"])), value=value
        )
