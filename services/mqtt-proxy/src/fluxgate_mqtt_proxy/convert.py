"""An MQTT message in, Kafka records out: the pure part of the proxy.

Used by the service and by the consumer-driven contract tests, so what the tests
verify is byte for byte what the proxy produces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fluxgate_core.errors import InvalidReading
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.payloads import parse_payload
from fluxgate_core.readings import Origin, build_reading
from fluxgate_core.serde import AvroEncoder
from fluxgate_mqtt_proxy.routing import Route, route_for


class NoRoute(InvalidReading):
    """A message arrived on a topic no route matches."""


class MessageConverter:
    """Turns one MQTT message into the ``SensorReading`` records it holds."""

    def __init__(self, routes: Sequence[Route], encoder: AvroEncoder | Mapping[str, AvroEncoder]) -> None:
        """``encoder``: one for every topic, or one per Kafka topic (each registered under its subject)."""
        self._routes = list(routes)
        topics = {route.settings.topic for route in self._routes}
        self._encoders = dict(encoder) if isinstance(encoder, Mapping) else dict.fromkeys(topics, encoder)

    def convert(self, topic: str, payload: bytes, user_properties: Mapping[str, str], now_ms: int) -> list[KafkaRecord]:
        """Records for ``payload``; raises PayloadError/InvalidReading for input to dead-letter."""
        route = route_for(self._routes, topic)
        if route is None:
            raise NoRoute(f"no route matches MQTT topic {topic!r}")
        measurements = parse_payload(payload, route.settings.format, route.fields)
        origin = Origin(
            protocol="MQTT",
            source=topic,
            ingest_time_ms=now_ms,
            device_id=route.device_from_topic(topic),
            metric=route.metric_from_topic(topic),
            attributes=dict(user_properties),
        )
        headers = [("mqtt.topic", topic.encode()), *((k, v.encode()) for k, v in user_properties.items())]
        records = []
        for measurement in measurements:
            reading = build_reading(measurement, origin)
            value = self._encoders[route.settings.topic].encode(reading)
            records.append(KafkaRecord(route.settings.topic, reading["device_id"].encode(), value, headers))
        return records
