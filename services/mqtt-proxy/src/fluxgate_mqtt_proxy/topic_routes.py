"""Compiled routes: which rule a topic matches and what the topic says about the reading.

A route is compiled once at start (split into levels, JSON field names resolved), so
matching a message is a walk over a handful of levels with no parsing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from fluxgate_core.errors import InvalidReading
from fluxgate_core.kcql import DYNAMIC_TARGET, FieldPath
from fluxgate_core.payloads import JsonFields
from fluxgate_mqtt_proxy.route_settings import RouteSettings
from fluxgate_mqtt_proxy.topics import (
    filter_levels,
    kafka_topic_for,
    kafka_topic_problem,
    matches,
    shared,
    split_share,
    topic_level,
)

DYNAMIC_TOPIC_CACHE_SIZE = 65_536  # MQTT topics whose `$` Kafka topic is remembered


@dataclass(frozen=True)
class Route:
    """A validated rule: the subscription to make and how to read the messages it matches."""

    settings: RouteSettings
    subscription: str
    levels: tuple[str, ...]
    fields: JsonFields
    device_level: int | None
    metric_level: int | None
    metric_const: str | None
    key_fields: tuple[FieldPath, ...] = ()

    @property
    def dynamic(self) -> bool:
        """``topic: $``: the Kafka topic is derived from each message's MQTT topic."""
        return self.settings.topic == DYNAMIC_TARGET

    def kafka_topic(self, topic: str) -> str:
        """Where a message on ``topic`` goes; InvalidReading when a derived name is not a Kafka topic's."""
        return _derived_topic(topic, self.settings.topic_separator) if self.dynamic else self.settings.topic

    @property
    def name(self) -> str:
        """A metrics label: the filter as configured (low cardinality, unlike topics)."""
        return self.settings.filter

    def match(self, topic: str) -> bool:
        return matches(self.levels, topic)

    def device_from_topic(self, topic: str) -> str | None:
        if self.device_level is not None:
            return topic_level(topic, self.device_level)
        return topic if self.settings.device_from == "topic" else None

    def metric_from_topic(self, topic: str) -> str | None:
        if self.metric_const is not None:
            return self.metric_const
        return topic_level(topic, self.metric_level) if self.metric_level is not None else None


def compile_route(route: RouteSettings, share_group: str | None = None) -> Route:
    """Compile one validated rule; ``share_group`` applies to rules without their own ``$share``."""
    group, bare = split_share(route.filter)
    names = route.fields.model_dump()
    if route.device_from.startswith("payload:"):
        names["device"] = route.device_from.removeprefix("payload:")
    metric = route.metric_from
    return Route(
        settings=route,
        subscription=shared(bare, group or share_group),
        levels=tuple(filter_levels(bare)),
        fields=JsonFields(**names),
        device_level=route.topic_level("device_from"),
        metric_level=route.topic_level("metric_from"),
        metric_const=metric.removeprefix("const:") if metric.startswith("const:") else None,
        key_fields=tuple(tuple(name.split(".")) for name in route.key_fields),
    )


def compile_routes(routes: Sequence[RouteSettings], share_group: str | None = None) -> list[Route]:
    return [compile_route(route, share_group) for route in routes]


def route_for(routes: Sequence[Route], topic: str) -> Route | None:
    """The first route whose filter matches ``topic`` (routes are tried in configured order)."""
    return next((route for route in routes if route.match(topic)), None)


@functools.lru_cache(maxsize=DYNAMIC_TOPIC_CACHE_SIZE)
def _derived_topic(topic: str, separator: str) -> str:
    name = kafka_topic_for(topic, separator)
    if (problem := kafka_topic_problem(name)) is not None:
        raise InvalidReading(f"MQTT topic {topic[:256]!r} gives Kafka topic {name[:256]!r} (INSERT INTO $): {problem}")
    return name
