"""An MQTT message in, Kafka records out: the pure part of the proxy.

Used by the service and by the consumer-driven contract tests, so what the tests
verify is byte for byte what the proxy produces. MQTT 5 user properties become Kafka
headers, beside an ``mqtt.topic`` header, and also ``attributes`` of the reading: the
contract names them there, and consumers that only read the Avro value still see them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from fluxgate_core.errors import InvalidReading
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.limits import DEFAULT_LIMITS, PayloadLimits
from fluxgate_core.payloads import NO_ATTRIBUTES, parse_payload
from fluxgate_core.readings import Origin, build_reading
from fluxgate_core.serde import AvroEncoder
from fluxgate_mqtt_proxy.routing import Route, compile_routes, route_for
from fluxgate_mqtt_proxy.settings import RouteSettings

TOPIC_HEADER = "mqtt.topic"
ROUTE_CACHE_SIZE = 65_536  # distinct MQTT topics whose route is remembered (least recently used go)


class NoRoute(InvalidReading):
    """A message arrived on a topic no rule matches (a safety net: we only subscribe to rule filters)."""


class MessageConverter:
    """Turns one MQTT message into the ``SensorReading`` records it holds."""

    def __init__(
        self,
        rules: Sequence[RouteSettings | Route],
        encoder: AvroEncoder | Mapping[str, AvroEncoder],
        limits: PayloadLimits = DEFAULT_LIMITS,
    ) -> None:
        """``encoder``: one for every Kafka topic, or one per topic (each registered under its own subject)."""
        self.limits = limits
        self.routes = [rule if isinstance(rule, Route) else compile_routes([rule])[0] for rule in rules]
        topics = {route.settings.topic for route in self.routes}
        self._encoders = dict(encoder) if isinstance(encoder, Mapping) else dict.fromkeys(topics, encoder)
        # Devices publish on the same few topics again and again: match each topic's filters once.
        self._routes_by_topic = functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)(functools.partial(route_for, self.routes))

    def route(self, topic: str) -> Route | None:
        """The rule ``topic`` falls under (rules are tried in configured order)."""
        return self._routes_by_topic(topic)

    def convert(
        self,
        topic: str,
        payload: bytes,
        user_properties: Mapping[str, str],
        now_ms: int,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> list[KafkaRecord]:
        """Records for ``payload`` (key = device id); raises PayloadError/InvalidReading for input to dead-letter.

        ``headers``: :func:`message_headers` of the message, when the caller has them already.
        """
        self.limits.check_size(payload)  # first: an oversized payload is not even looked at
        route = self.route(topic)
        if route is None:
            raise NoRoute(f"no routing rule matches MQTT topic {topic[:256]!r}")
        measurements = parse_payload(payload, route.settings.format, route.fields, self.limits)
        origin = Origin(
            protocol="MQTT",
            source=topic,
            ingest_time_ms=now_ms,
            device_id=route.device_from_topic(topic),
            metric=route.metric_from_topic(topic),
            attributes=dict(user_properties) if user_properties else NO_ATTRIBUTES,
        )
        if headers is None:
            headers = message_headers(topic, user_properties)
        encoder = self._encoders[route.settings.topic]
        records = []
        for measurement in measurements:
            reading = build_reading(measurement, origin)
            key = reading["device_id"].encode()
            records.append(KafkaRecord(route.settings.topic, key, encoder.encode(reading), headers))
        return records


def message_headers(topic: str, user_properties: Mapping[str, str]) -> list[tuple[str, bytes]]:
    """Kafka headers for a message: its MQTT topic, then its MQTT 5 user properties.

    Without user properties the list depends on the topic alone, and devices publish on the
    same topics again and again: it is built once per topic (nothing changes these lists).
    """
    if not user_properties:
        return _topic_headers(topic)
    return [(TOPIC_HEADER, topic.encode()), *((key, value.encode()) for key, value in user_properties.items())]


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def _topic_headers(topic: str) -> list[tuple[str, bytes]]:
    return [(TOPIC_HEADER, topic.encode())]
