"""Kafka Connect's ``transforms`` and ``predicates`` keys: a sink's chain becomes ``SINK__TRANSFORMS``
(run by the sink runtime, :mod:`fluxgate_sink.transforms`); a source's is refused.

The keys are Kafka Connect's (ConnectorConfig): ``transforms`` lists the names in order, each
``transforms.<name>.type`` its class, ``transforms.<name>.predicate`` and ``.negate`` its predicate,
any other ``transforms.<name>.<option>`` an option of the class; ``predicates`` and
``predicates.<name>.*`` the same for predicates. Keys of a name the list does not hold are ignored
by Kafka Connect, and here with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fluxgate_connect.rules import Rule, RuleError, Setting, Unsupported, boolean, items
from fluxgate_sink.smt import TransformConfigError
from fluxgate_sink.transforms import PREDICATE_CLASSES, TRANSFORM_CLASSES, TransformConfig, chain, supported_transforms

KEYS = ("transforms", "predicates")
ROWS = (
    "transforms",
    "transforms.<name>.type",
    "transforms.<name>.predicate",
    "transforms.<name>.negate",
    "transforms.<name>.<option>",
    "predicates",
    "predicates.<name>.type",
    "predicates.<name>.<option>",
)
_CHAIN = Setting(
    ("sink.transforms",),
    lambda value: {},  # all the keys together make the setting: see sink_chain
    note="the chain, in order, as JSON; the classes run: "
    + ", ".join(name.rsplit(".", 1)[1] for name in supported_transforms())
    + " (Kafka's org.apache.kafka.connect.transforms classes), with the predicates TopicNameMatches, "
    "HasHeaderKey and RecordIsTombstone; any other class is refused naming it, a wrong option naming its key; "
    "a record a transform cannot apply to goes to the dead-letter topic with the reason, a filtered one is "
    "committed and counted (fluxgate_sink_records_filtered_total)",
)
_SOURCE = Unsupported(
    "a gateway builds its records itself (the device's reading, keyed by the device id): transforms are not "
    "applied to them; remove the transforms, and give them to the sink config that reads the topic"
)
SINK_RULES: dict[str, Rule] = dict.fromkeys(ROWS, _CHAIN)
SOURCE_RULES: dict[str, Rule] = dict.fromkeys(ROWS, _SOURCE)


def is_transform_key(key: str) -> bool:
    return key in KEYS or key.startswith(("transforms.", "predicates."))


def source_refusal(config: Mapping[str, str]) -> list[str]:
    """A source config's transforms: one refusal naming the keys."""
    keys = sorted(key for key in config if is_transform_key(key))
    return [f"{', '.join(keys)}: not supported: {_SOURCE.reason}"] if keys else []


def sink_chain(config: Mapping[str, str]) -> tuple[str | None, list[str], list[str]]:
    """``SINK__TRANSFORMS`` (JSON, None without transforms), the errors and the warnings."""
    warnings = _unlisted(config)
    try:
        names = _names(config, "transforms")
        predicates = {name: _predicate(config, name) for name in _names(config, "predicates")}
        steps = [_step(config, name, predicates) for name in names]
        warnings += [warning for step in steps for warning in _ignored(step)]
        warnings += [
            f"transforms.{name}.negate: no predicate to negate: ignored, as Kafka Connect does"
            for name in names
            if f"transforms.{name}.negate" in config and not config.get(f"transforms.{name}.predicate", "").strip()
        ]
        chain([TransformConfig.model_validate(step) for step in steps])
    except (RuleError, TransformConfigError) as exc:
        return None, [str(exc)], warnings
    return (json.dumps(steps) if steps else None), [], warnings


def _names(config: Mapping[str, str], key: str) -> list[str]:
    if not config.get(key, "").strip():
        return []
    names = items(config[key])
    if len(set(names)) < len(names):
        raise RuleError(f"{key}={config[key]}: a name is listed twice")
    return names


def _options(config: Mapping[str, str], prefix: str, own: tuple[str, ...]) -> dict[str, str]:
    """The class's options: the keys under ``prefix`` but the ones Kafka Connect itself reads."""
    options = {key[len(prefix) :]: value for key, value in config.items() if key.startswith(prefix)}
    return {option: value for option, value in options.items() if option not in own}


def _type(config: Mapping[str, str], prefix: str) -> str:
    found = config.get(f"{prefix}type", "").strip()
    if not found:
        raise RuleError(f"{prefix}type: required: the class")
    return found


def _predicate(config: Mapping[str, str], name: str) -> dict[str, Any]:
    prefix = f"predicates.{name}."
    return {"name": name, "type": _type(config, prefix), "config": _options(config, prefix, ("type",))}


def _step(config: Mapping[str, str], name: str, predicates: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    prefix = f"transforms.{name}."
    step: dict[str, Any] = {
        "name": name,
        "type": _type(config, prefix),
        "config": _options(config, prefix, ("type", "predicate", "negate")),
    }
    predicate = config.get(f"{prefix}predicate", "").strip()
    if predicate:
        if predicate not in predicates:
            raise RuleError(f"{prefix}predicate: {predicate} is not one of predicates ({', '.join(predicates)})")
        step["predicate"] = predicates[predicate]
    if f"{prefix}negate" in config and predicate:  # without a predicate Kafka Connect never reads it
        try:
            step["negate"] = boolean(config[f"{prefix}negate"]) == "true"
        except RuleError as exc:
            raise RuleError(f"{prefix}negate: {exc}") from exc
    return step


def _ignored(step: dict[str, Any]) -> list[str]:
    """Options the class does not have, dropped with a warning: Kafka Connect's ConfigDef ignores them too
    (an option of a later Kafka release, a typo), and refusing them would stop a config Connect runs."""
    warnings = []
    for kind, part, classes in (
        ("transforms", step, TRANSFORM_CLASSES),
        ("predicates", step.get("predicate"), PREDICATE_CLASSES),
    ):
        found = classes.get(part["type"]) if part else None
        if part is None or found is None:
            continue
        for option in sorted(set(part["config"]) - found[0]):
            warnings.append(
                f"{kind}.{part['name']}.{option}: not an option of {part['type']}: ignored, as Kafka Connect does"
            )
            del part["config"][option]
    return warnings


def _unlisted(config: Mapping[str, str]) -> list[str]:
    """Keys of a transform or predicate the list does not name: Kafka Connect never reads them."""
    warnings = []
    for key in sorted(config):
        for kind in KEYS:
            if key.startswith(f"{kind}.") and key.split(".")[1] not in config.get(kind, "").replace(" ", "").split(","):
                warnings.append(f"{key}: {key.split('.')[1]} is not listed in {kind}: ignored")
    return warnings
