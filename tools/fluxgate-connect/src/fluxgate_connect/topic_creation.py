"""Kafka Connect's topic creation for source connectors (KIP-158) as a gateway's
``kafka.topic_creation`` settings.

Kafka Connect creates the topics a source connector writes when the worker's
``topic.creation.enable`` is true (its default) and the connector has ``topic.creation.*``
keys; the default group's ``partitions`` and ``replication.factor`` are then required (-1 for
the broker's default), and any other ``topic.creation.default.<config>`` is a topic-level
config of the topics it creates (Kafka Connect's SourceConnectorConfig and TopicCreationConfig).
Without such keys nothing is created, and the gateway stops at start naming a missing topic.
Sink connectors create no topics: there the keys are unknown, as to Kafka Connect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from fluxgate_connect.rules import Rule, RuleError, Setting, Unsupported, boolean, integer

PREFIX = "topic.creation."
DEFAULT = f"{PREFIX}default."
ENABLE = f"{PREFIX}enable"
PARTITIONS = f"{DEFAULT}partitions"
REPLICATION = f"{DEFAULT}replication.factor"
GROUPS = Unsupported(
    "one creation setting for every topic the gateway writes (its targets and its dead-letter topic): "
    f"put the group's partitions, replication factor and configs in {DEFAULT}*"
)

# The table's rows (docs/kafka-connect.md); :func:`topic_creation` reads the keys together.
RULES: dict[str, Rule] = {
    ENABLE: Setting(
        ("kafka.topic_creation.enable",),
        lambda value: {"kafka.topic_creation.enable": boolean(value)},
        note="the worker's switch (default true): false never creates a topic; true creates them only when the "
        f"config has {PREFIX}* keys, as Kafka Connect does",
    ),
    PARTITIONS: Setting(
        ("kafka.topic_creation.partitions",),
        lambda value: {"kafka.topic_creation.partitions": integer(value)},
        note=f"with {REPLICATION}, required once any {PREFIX}* key is set; -1: the broker's num.partitions",
    ),
    REPLICATION: Setting(
        ("kafka.topic_creation.replication_factor",),
        lambda value: {"kafka.topic_creation.replication_factor": integer(value)},
        note=f"with {PARTITIONS}, required once any {PREFIX}* key is set; -1: the broker's default",
    ),
    f"{DEFAULT}*": Setting(
        ("kafka.topic_creation.config",),
        lambda value: {},  # read together with the others (topic_creation)
        note="any other key under it is a topic-level config of the topics created (retention.ms, cleanup.policy ...)",
    ),
    f"{PREFIX}groups": GROUPS,
}


def is_topic_creation_key(key: str) -> bool:
    return key.startswith(PREFIX)


def topic_creation(config: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The ``kafka.topic_creation`` settings of a source config's ``topic.creation.*`` keys,
    and the errors (every one: a group, a missing or malformed count)."""
    keys = {key: value for key, value in config.items() if is_topic_creation_key(key)}
    if not keys:
        return {}, []
    errors = [f"{key}: not supported: {GROUPS.reason}" for key in sorted(keys) if _grouped(key)]
    try:
        if boolean(keys.get(ENABLE, "true")) == "false":
            return {"kafka.topic_creation.enable": "false"}, errors
    except RuleError as exc:
        return {}, [*errors, f"{ENABLE}={keys[ENABLE]}: {exc}"]
    if set(keys) == {ENABLE}:  # the worker's switch alone asks nothing of this connector
        return {}, errors
    values = {"kafka.topic_creation.enable": "true", "kafka.topic_creation.config": json.dumps(_configs(keys))}
    for key, field in ((PARTITIONS, "partitions"), (REPLICATION, "replication_factor")):
        if key not in keys:
            errors.append(f"{key}: required with {PREFIX}* keys (Kafka Connect's too; -1: the broker's default)")
            continue
        try:
            values[f"kafka.topic_creation.{field}"] = _count(keys[key])
        except RuleError as exc:
            errors.append(f"{key}={keys[key]}: {exc}")
    return values, errors


def _grouped(key: str) -> bool:
    """A key of a creation group other than the default (or the list of groups)."""
    return key != ENABLE and not key.startswith(DEFAULT)


def _configs(keys: Mapping[str, str]) -> dict[str, str]:
    return {
        key.removeprefix(DEFAULT): value.strip()
        for key, value in sorted(keys.items())
        if key.startswith(DEFAULT) and key not in (PARTITIONS, REPLICATION)
    }


def _count(value: str) -> str:
    count = int(integer(value))
    if count == 0 or count < -1:
        raise RuleError("at least 1, or -1 for the broker's default")
    return str(count)
