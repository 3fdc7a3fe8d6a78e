"""MQTT topic filters and compiled routes: which rule a topic matches and what it says.

A route is compiled once at start (validated, split into levels), so matching a
message is a walk over a handful of levels with no parsing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fluxgate_core.errors import ConfigError
from fluxgate_core.payloads import JsonFields
from fluxgate_mqtt_proxy.settings import RouteSettings

SHARE_PREFIX = "$share/"


def split_share(topic_filter: str) -> tuple[str | None, str]:
    """``$share/group/a/+`` -> ``("group", "a/+")``; a plain filter has no group."""
    if not topic_filter.startswith(SHARE_PREFIX):
        return None, topic_filter
    group, _, rest = topic_filter[len(SHARE_PREFIX) :].partition("/")
    if not group or not rest or "+" in group or "#" in group:
        raise ValueError(f"shared subscription {topic_filter!r} must be $share/<group>/<filter>")
    return group, rest


def validate_filter(topic_filter: str) -> list[str]:
    """The filter's levels; ``ValueError`` if it breaks MQTT's wildcard rules."""
    levels = topic_filter.split("/")
    for index, level in enumerate(levels):
        if "#" in level and (level != "#" or index != len(levels) - 1):
            raise ValueError(f"'#' must be a whole last level in {topic_filter!r}")
        if "+" in level and level != "+":
            raise ValueError(f"'+' must be a whole level in {topic_filter!r}")
    return levels


def matches(filter_levels: Sequence[str], topic: str) -> bool:
    """MQTT matching: ``+`` one level, ``#`` the rest (including none); ``$`` topics only literally."""
    levels = topic.split("/")
    if topic.startswith("$") and filter_levels and filter_levels[0] in ("+", "#"):
        return False
    for index, wanted in enumerate(filter_levels):
        if wanted == "#":
            return True
        if index >= len(levels) or (wanted != "+" and wanted != levels[index]):
            return False
    return len(levels) == len(filter_levels)


@dataclass(frozen=True)
class Route:
    """A validated route: the subscription to make and how to read matching messages."""

    settings: RouteSettings
    subscription: str
    levels: tuple[str, ...]
    fields: JsonFields
    device_level: int | None
    metric_level: int | None
    metric_const: str | None

    def match(self, topic: str) -> bool:
        return matches(self.levels, topic)

    def device_from_topic(self, topic: str) -> str | None:
        return _level(topic, self.device_level)

    def metric_from_topic(self, topic: str) -> str | None:
        return self.metric_const or _level(topic, self.metric_level)


def _level(topic: str, index: int | None) -> str | None:
    if index is None:
        return None
    levels = topic.split("/")
    return levels[index] if index < len(levels) else None


def compile_routes(routes: Sequence[RouteSettings], share_group: str | None = None) -> list[Route]:
    """Validate every route; :class:`ConfigError` names the route and field that is wrong."""
    return [_compile(index, route, share_group) for index, route in enumerate(routes)]


def _compile(index: int, route: RouteSettings, share_group: str | None) -> Route:
    where = f"routes[{index}]"
    try:
        group, bare = split_share(route.filter)
        levels = validate_filter(bare)
    except ValueError as exc:
        raise ConfigError(f"{where}.filter [env FLUXGATE_MQTT_ROUTES]: {exc}") from exc
    group = group or share_group
    subscription = f"{SHARE_PREFIX}{group}/{bare}" if group else bare
    device_level = _topic_level(route.device_from, levels, f"{where}.device_from")
    metric_level = _topic_level(route.metric_from, levels, f"{where}.metric_from")
    names = route.fields.model_dump()
    if route.device_from.startswith("payload:"):
        names["device"] = route.device_from.removeprefix("payload:")
    metric_const = route.metric_from.removeprefix("const:") if route.metric_from.startswith("const:") else None
    return Route(route, subscription, tuple(levels), JsonFields(**names), device_level, metric_level, metric_const)


def _topic_level(source: str, levels: list[str], where: str) -> int | None:
    """The level index of a ``topic:N`` source, checked against the filter's levels."""
    if not source.startswith("topic:"):
        return None
    raw = source.removeprefix("topic:")
    if not raw.isdigit():
        raise ConfigError(f"{where} [env FLUXGATE_MQTT_ROUTES]: {source!r} needs a level number, e.g. topic:1")
    index = int(raw)
    if index >= len(levels) or levels[index] == "#":
        raise ConfigError(f"{where} [env FLUXGATE_MQTT_ROUTES]: level {index} is beyond the filter's fixed levels")
    return index


def route_for(routes: Sequence[Route], topic: str) -> Route | None:
    """The first route whose filter matches ``topic`` (routes are tried in configured order)."""
    return next((route for route in routes if route.match(topic)), None)
