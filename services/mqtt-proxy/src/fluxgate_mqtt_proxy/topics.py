"""MQTT topic filters: validation, ``$share`` groups and matching (MQTT 5, section 4.7).

Pure functions on strings, shared by settings validation (so a bad filter fails at
start) and by routing (so a message finds its rule).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

SHARE_PREFIX = "$share/"
MAX_KAFKA_TOPIC_CHARS = 249
_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._\-]+$")
_SLASHES = re.compile("/+")
# Not Kafka's own topics (__consumer_offsets) nor a registry's (_schemas): no leading '_', '.' or '-'.
DEFAULT_DERIVED_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._\-]*"
DEFAULT_MAX_DERIVED = 100


def split_share(topic_filter: str) -> tuple[str | None, str]:
    """``$share/group/a/+`` -> ``("group", "a/+")``; a plain filter has no group.

    ``ValueError`` when a ``$share`` filter has no group or no filter after it.
    """
    if not topic_filter.startswith(SHARE_PREFIX):
        return None, topic_filter
    group, _, rest = topic_filter[len(SHARE_PREFIX) :].partition("/")
    if not group or not rest or "+" in group or "#" in group:
        raise ValueError(f"shared subscription {topic_filter!r} must be $share/<group>/<filter>")
    return group, rest


def filter_levels(topic_filter: str) -> list[str]:
    """The levels of a filter (without ``$share``); ``ValueError`` if it breaks MQTT's wildcard rules."""
    if not topic_filter:
        raise ValueError("topic filter is empty")
    if "\x00" in topic_filter:
        raise ValueError("topic filter contains a NUL character")
    levels = topic_filter.split("/")
    for index, level in enumerate(levels):
        if "#" in level and (level != "#" or index != len(levels) - 1):
            raise ValueError(f"'#' must be the whole last level in {topic_filter!r}")
        if "+" in level and level != "+":
            raise ValueError(f"'+' must be a whole level in {topic_filter!r}")
    return levels


def shared(topic_filter: str, group: str | None) -> str:
    """The subscription for ``topic_filter`` (no ``$share``) in ``group`` (none: a plain one)."""
    return f"{SHARE_PREFIX}{group}/{topic_filter}" if group else topic_filter


def matches(levels: Sequence[str], topic: str) -> bool:
    """MQTT matching: ``+`` is one level, ``#`` the rest (even none); ``$`` topics never match a leading wildcard."""
    parts = topic.split("/")
    if topic.startswith("$") and levels and levels[0] in ("+", "#"):
        return False
    for index, wanted in enumerate(levels):
        if wanted == "#":
            return True
        if index >= len(parts) or (wanted != "+" and wanted != parts[index]):
            return False
    return len(parts) == len(levels)


def topic_level(topic: str, index: int) -> str | None:
    """Level ``index`` of a topic name; None when the topic is shorter or the level is empty."""
    parts = topic.split("/")
    return (parts[index] or None) if index < len(parts) else None


def kafka_topic_for(topic: str, separator: str) -> str:
    """The Kafka topic of KCQL's ``INSERT INTO $``: Stream-Reactor's rule, with our separator.

    Stream-Reactor's MQTT source drops the first ``/`` of the MQTT topic (wherever it is, so
    ``/a/b`` and ``a/b`` both give ``a...b`` without a leading separator; ``a/b/c`` gives
    ``ab_c``) and replaces every further run of ``/`` by ``_``. Kept as it is, so the topics
    a migrated pipeline writes are the ones its consumers already read.
    """
    return _SLASHES.sub(lambda _: separator, topic.replace("/", "", 1))


def kafka_topic_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name, or None."""
    if not 0 < len(name) <= MAX_KAFKA_TOPIC_CHARS or name in (".", ".."):
        return f"a Kafka topic name has 1 to {MAX_KAFKA_TOPIC_CHARS} characters and is not '.' or '..'"
    if not _KAFKA_TOPIC.match(name):
        return "a Kafka topic name holds only ASCII letters, digits, '.', '_' and '-'"
    return None


@dataclass(frozen=True)
class DerivedTargets:
    """Which Kafka topics ``INSERT INTO $`` routes may derive from devices' MQTT topics: the
    device names the Kafka topic and the registry subject, so it is held to ``pattern`` (whole
    name), never to one of ``refused`` (the dead-letter topic), and to ``max_topics`` in all."""

    pattern: re.Pattern[str] = field(default_factory=lambda: re.compile(DEFAULT_DERIVED_PATTERN))
    max_topics: int = DEFAULT_MAX_DERIVED
    refused: frozenset[str] = frozenset()

    def problem(self, name: str) -> str | None:
        """Why ``name`` may not be a derived target, or None."""
        if name in self.refused:
            return f"derived Kafka topic {name!r} is the proxy's own (the dead-letter topic)"
        if not self.pattern.fullmatch(name):
            return f"derived Kafka topic {name!r} does not match {self.pattern.pattern!r} (DERIVED_TOPICS__PATTERN)"
        return None
