"""Stream-Reactor MQTT source KCQL (``FLUXGATE_MQTT_KCQL``) as the proxy's routes.

Each statement becomes one :class:`RouteSettings`, so everything after the settings (subscribing,
routing, converting, keying) is the code routes configured as JSON run through. What a statement
does not say takes the defaults Stream-Reactor users would expect of a connector that passes
the whole payload on:

* the device id is the payload's own device field (``sensorId``), else the whole MQTT topic
  (Stream-Reactor keys its records by the MQTT topic: each topic is one stream);
* the metrics are the payload's (JSON object keys, SenML names);
* the payload format follows WITHCONVERTER (JSON for the JSON converters), else ``auto``;
* the Kafka key is the WITHKEY fields' values joined by KEYDELIMITER (``.``), else the device id.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ValidationError

from fluxgate_core.kcql import MQTT_SOURCE, parse_sources
from fluxgate_mqtt_proxy.route_settings import STREAM_REACTOR_SEPARATOR, RouteSettings


def routes_from_kcql(
    text: str, topic_separator: str = STREAM_REACTOR_SEPARATOR, qos: Literal[0, 1, 2] = 1
) -> list[RouteSettings]:
    """One route per statement, in order, each subscribed at ``qos``; a ValueError (a KcqlError)
    for a statement that fails."""
    routes = []
    for statement in parse_sources(text, MQTT_SOURCE):
        try:
            routes.append(
                RouteSettings(
                    filter=statement.sources[0],
                    topic=statement.target,
                    topic_separator=topic_separator,
                    device_from="topic",
                    metric_from="payload",
                    format=statement.payload_format,
                    key_fields=[".".join(path) for path in statement.key_fields],
                    key_delimiter=statement.key_delimiter,
                    qos=qos,
                )
            )
        except ValidationError as exc:  # a filter MQTT refuses: say which statement, in the route's words
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"KCQL statement {statement.text!r}: {problems}") from exc
    return routes
