"""What one MQTT route is: a topic filter and how its messages become readings.

Shared by the settings (``FLUXGATE_MQTT_ROUTES``, and the default routes) and by the KCQL
translation (``FLUXGATE_MQTT_KCQL``), which both make :class:`RouteSettings`.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from fluxgate_core.payloads import PayloadFormat
from fluxgate_core.settings import Group
from fluxgate_mqtt_proxy.topics import filter_levels, split_share

_DEVICE_SOURCE = re.compile(r"^(topic|topic:\d+|payload|payload:.+)$")
KAFKA_NAME_CHARS = r"^[A-Za-z0-9._\-]*$"  # what Kafka allows in a topic name
STREAM_REACTOR_SEPARATOR = "_"  # what Stream-Reactor's MQTT source puts between the levels of a `$` topic
_METRIC_SOURCE = re.compile(r"^(topic:\d+|payload|const:.+)$")


class FieldNames(Group):
    """Which keys of a JSON/CBOR object mean what (every other numeric key is a metric)."""

    device: str = Field("sensorId", min_length=1, description="device id key")
    time: str = Field("timestamp", min_length=1, description="event time key (epoch s/ms or ISO-8601)")
    sequence: str = Field("seq", min_length=1, description="sequence number key")
    unit: str = Field("unit", min_length=1, description="unit key")
    metric: str = Field("metric", min_length=1, description="metric name key (with a value key)")
    value: str = Field("value", min_length=1, description="value key (with a metric key)")


class RouteSettings(Group):
    """One MQTT topic filter and how its messages become readings."""

    filter: str = Field(min_length=1, description="MQTT topic filter (+ and #), optionally $share/<group>/...")
    topic: str = Field(
        "sensors.readings", min_length=1, description="Kafka topic of the readings; $: derived from the MQTT topic"
    )
    topic_separator: str = Field(
        STREAM_REACTOR_SEPARATOR,
        pattern=KAFKA_NAME_CHARS,
        description="topic $: what replaces the '/' between MQTT topic levels (the first '/' is dropped)",
    )
    device_from: str = Field(
        "payload",
        description="topic:N (topic level, 0-based), topic (the whole MQTT topic), payload (its own device "
        "field) or payload:<field>; the payload's own device field wins over topic and topic:N",
    )
    metric_from: str = Field("payload", description="topic:N, payload (object keys / SenML names) or const:<name>")
    format: PayloadFormat = Field("auto", description="auto | json | number | senml | cbor | senml-cbor")
    fields: FieldNames = Field(default_factory=FieldNames, description="JSON/CBOR field names")
    qos: Literal[0, 1, 2] = Field(1, description="QoS of the subscription")
    key_fields: list[str] = Field(
        default_factory=list,
        description="Kafka key: these fields' values joined by key_delimiter, each a reading's field (device_id, "
        "metric, ...) else the payload's own (a.b for nested); empty: the device id",
    )
    key_delimiter: str = Field(".", description="between the key_fields' values")

    @field_validator("filter")
    @classmethod
    def _valid_filter(cls, value: str) -> str:
        _, bare = split_share(value)
        filter_levels(bare)
        return value

    @field_validator("device_from")
    @classmethod
    def _device_source(cls, value: str) -> str:
        if not _DEVICE_SOURCE.match(value):
            raise ValueError(f"expected topic:N, payload or payload:<field>, got {value!r}")
        return value

    @field_validator("metric_from")
    @classmethod
    def _metric_source(cls, value: str) -> str:
        if not _METRIC_SOURCE.match(value):
            raise ValueError(f"expected topic:N, payload or const:<name>, got {value!r}")
        return value

    @model_validator(mode="after")
    def _levels_within_filter(self) -> RouteSettings:
        levels = filter_levels(split_share(self.filter)[1])
        for name in ("device_from", "metric_from"):
            index = self.topic_level(name)
            if index is not None and (index >= len(levels) or levels[index] == "#"):
                raise ValueError(f"{name}: level {index} is beyond the fixed levels of filter {self.filter!r}")
        return self

    def topic_level(self, name: Literal["device_from", "metric_from"]) -> int | None:
        """The level index of a ``topic:N`` source, None for the other kinds."""
        source: str = getattr(self, name)
        return int(source.removeprefix("topic:")) if source.startswith("topic:") else None


def default_routes() -> list[RouteSettings]:
    """What the simulator publishes: ``sensors/<device>/<metric>`` (JSON or a bare number), and SenML."""
    return [
        RouteSettings(filter="sensors/+/+", device_from="topic:1", metric_from="topic:2"),
        RouteSettings(filter="devices/+/senml", device_from="topic:1", format="senml"),
    ]
