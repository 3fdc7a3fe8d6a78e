"""Kafka Connect's Single Message Transforms on a sink's records: after decoding, before KCQL routing.

``SINK__TRANSFORMS`` is the chain, in order: each entry names a transform, its class (Kafka's own
class names, ``org.apache.kafka.connect.transforms.InsertField$Value`` ...), its options as Kafka
Connect's ``transforms.<name>.*`` keys give them, and optionally a predicate and ``negate``. As in
Kafka Connect, a transform with a predicate applies only to the records the predicate matches (those it
does not, with ``negate``); Filter drops the records it applies to. What each transform does is
:mod:`fluxgate_sink.smt`'s.

A record a transform cannot apply to (ExtractField on a text ...) or whose value is not an object once
transformed goes to the dead-letter topic with the reason, like a record that does not decode; a
record a Filter drops is committed with its batch and counted (``fluxgate_sink_records_filtered_total``).
A tombstone (and, for JSON values, any JSON that is not an object) goes through the chain too, so a
Filter on RecordIsTombstone drops it and HoistField can wrap a bare number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import Field

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import FluxgateError
from fluxgate_core.settings import Group
from fluxgate_sink import metrics, smt
from fluxgate_sink.errors import TransformError
from fluxgate_sink.formats import ConnectJsonDecoder, RecordFormat
from fluxgate_sink.smt import Operate, Options, TransformConfigError, TransformFailed

KAFKA = "org.apache.kafka.connect.transforms."
PREDICATES = f"{KAFKA}predicates."
ReadKey = Callable[[bytes | None], Any]
ReadValue = Callable[[bytes], Any]
T = TypeVar("T")


class PredicateConfig(Group):
    """A predicate (``predicates.<name>.*``) a transform refers to."""

    name: str = Field(..., min_length=1)
    type: str = Field(..., min_length=1, description="the predicate's class")
    config: dict[str, str] = Field(default_factory=dict, description="its options, e.g. pattern")


class TransformConfig(Group):
    """One transform of the chain (``transforms.<name>.*``)."""

    name: str = Field(..., min_length=1)
    type: str = Field(..., min_length=1, description="the transform's class")
    config: dict[str, str] = Field(default_factory=dict, description="its options, e.g. renames")
    predicate: PredicateConfig | None = None
    negate: bool = False


@dataclass(slots=True)
class Record:
    """A record going through the chain: what transforms read and change."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    headers: Sequence[tuple[str, bytes | None]]
    value: Any
    raw_key: bytes | None
    read_key: ReadKey
    changed_key: tuple[Any] | None = None  # set once the key is read or replaced

    @property
    def key(self) -> Any:
        if self.changed_key is None:
            try:
                self.changed_key = (self.read_key(self.raw_key),)
            except FluxgateError as exc:
                raise TransformFailed(f"the record key does not decode: {exc}") from exc
        return self.changed_key[0]

    @key.setter
    def key(self, key: Any) -> None:
        self.changed_key = (key,)


Predicate = Callable[[Record], bool]
Step = Callable[[Record], bool]  # False: the record is dropped (Filter)


def _topic_matches(options: Options) -> Predicate:
    text = options.text("pattern")
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise options.error("pattern", f"not a regular expression: {exc}") from exc
    return lambda record: pattern.fullmatch(record.topic) is not None


def _has_header(options: Options) -> Predicate:
    name = options.text("name")
    if not name:
        raise options.error("name", "required: the header key")
    return lambda record: any(key == name for key, _ in record.headers)


PREDICATE_CLASSES: dict[str, tuple[set[str], Callable[[Options], Predicate]]] = {
    f"{PREDICATES}TopicNameMatches": ({"pattern"}, _topic_matches),
    f"{PREDICATES}HasHeaderKey": ({"name"}, _has_header),
    f"{PREDICATES}RecordIsTombstone": (set(), lambda options: lambda record: record.value is None),
}


def _on_value(operate: Operate) -> Step:
    def step(record: Record) -> bool:
        record.value = operate(record.value, record)
        return True

    return step


def _on_key(operate: Operate) -> Step:
    def step(record: Record) -> bool:
        record.key = operate(record.key, record)
        return True

    return step


def _value_to_key(options: Options) -> Step:
    fields = smt.value_to_key(options)

    def step(record: Record) -> bool:
        value = smt.require_map(record.value, "copying fields from value to key")
        record.key = {field: value.get(field) for field in fields}
        return True

    return step


# field.syntax.version: read by every field-naming transform, V2 taken by ExtractField only (smt._syntax_v1).
_SYNTAX = {smt.NULL_DEFAULT, smt.SYNTAX}
_SIDED: dict[str, tuple[set[str], Callable[[Options], Operate]]] = {
    "InsertField": (
        {"topic.field", "partition.field", "offset.field", "timestamp.field", "static.field", "static.value"} | _SYNTAX,
        smt.insert_field,
    ),
    "ReplaceField": ({"exclude", "include", "renames", "blacklist", "whitelist"} | _SYNTAX, smt.replace_field),
    "ExtractField": ({"field"} | _SYNTAX, smt.extract_field),
    "TimestampConverter": (
        {"field", "target.type", "format", "unix.precision"} | _SYNTAX,
        smt.timestamp_converter,
    ),
    "Cast": ({"spec"} | _SYNTAX, smt.cast),
    "HoistField": ({"field"} | _SYNTAX, smt.hoist_field),
}


def _sided(make: Callable[[Options], Operate], wrap: Callable[[Operate], Step]) -> Callable[[Options], Step]:
    return lambda options: wrap(make(options))


TRANSFORM_CLASSES: dict[str, tuple[set[str], Callable[[Options], Step]]] = {
    **{
        f"{KAFKA}{name}${side}": (known, _sided(make, wrap))
        for name, (known, make) in _SIDED.items()
        for side, wrap in (("Key", _on_key), ("Value", _on_value))
    },
    f"{KAFKA}ValueToKey": ({"fields"} | _SYNTAX, _value_to_key),
    f"{KAFKA}Filter": (set(), lambda options: lambda record: False),
}


@dataclass(frozen=True)
class _Link:
    name: str
    step: Step
    predicate: Predicate | None
    negate: bool


def chain(configs: Sequence[TransformConfig]) -> list[_Link]:
    """The transforms, configured; TransformConfigError names the first wrong key."""
    return [_link(config) for config in configs]


def _link(config: TransformConfig) -> _Link:
    prefix = f"transforms.{config.name}"
    step = _configure(prefix, config.type, config.config, TRANSFORM_CLASSES, "transforms")
    predicate = None
    if config.predicate is not None:
        found = config.predicate
        predicate = _configure(f"predicates.{found.name}", found.type, found.config, PREDICATE_CLASSES, "predicates")
    elif config.negate:
        raise TransformConfigError(f"{prefix}.negate: a transform without a predicate has nothing to negate")
    return _Link(config.name, step, predicate, config.negate)


def _configure(
    prefix: str,
    name: str,
    config: dict[str, str],
    classes: dict[str, tuple[set[str], Callable[[Options], T]]],
    what: str,
) -> T:
    found = classes.get(name.strip())
    if found is None:
        raise TransformConfigError(
            f"{prefix}.type: {name} is not supported; the supported {what} are {', '.join(classes)}"
        )
    known, make = found
    return make(Options(prefix, config, known))


def supported_transforms() -> list[str]:
    return list(TRANSFORM_CLASSES)


def value_reader(value_format: RecordFormat, schemas_enable: bool) -> ReadValue | None:
    """How a JSON value that is not an object is read for the chain (HoistField can wrap it); Avro: none."""
    if value_format == "avro":
        return None
    return ConnectJsonDecoder(schemas_enable and value_format == "json", text=value_format == "string").read


class Transforms:
    """The chain applied to a batch of consumed records."""

    def __init__(self, configs: Sequence[TransformConfig], read_key: ReadKey, read_value: ReadValue | None) -> None:
        self._links = chain(configs)
        self._read_key = read_key
        self._read_value = read_value  # JSON values: what did not decode as an object is read as it is

    def __bool__(self) -> bool:
        return bool(self._links)

    def apply(self, records: list[ConsumedRecord]) -> list[ConsumedRecord]:
        """The records the chain keeps, transformed, or failed (``record`` None, ``error`` the reason)."""
        if not self._links:
            return records
        kept: list[ConsumedRecord] = []
        for consumed in records:
            out = self._one(consumed)
            if out is not None:
                kept.append(out)
        return kept

    def _one(self, consumed: ConsumedRecord) -> ConsumedRecord | None:
        value = self._value_of(consumed)
        if value is _UNREADABLE:
            return consumed  # it did not decode: dead-lettered with its own reason
        record = Record(
            consumed.topic, consumed.partition, consumed.offset, consumed.timestamp_ms, consumed.headers,
            value, consumed.key, self._read_key,
        )  # fmt: skip
        for link in self._links:
            if link.predicate is not None and link.predicate(record) == link.negate:
                continue
            try:
                if not link.step(record):
                    metrics.FILTERED.labels(link.name).inc()
                    return None
            except TransformFailed as exc:
                return _failed(consumed, f"transforms.{link.name}: {exc}")
        if record.value is None and value is None:  # a tombstone still: one the sink may take as a delete
            return consumed._replace(transformed_key=record.changed_key)
        if not isinstance(record.value, dict):
            return _failed(consumed, f"after the transforms the value is {smt._kind(record.value)}, not an object")
        return consumed._replace(record=record.value, error=None, transformed_key=record.changed_key)

    def _value_of(self, consumed: ConsumedRecord) -> Any:
        if consumed.record is not None:
            return consumed.record
        if not consumed.value:
            return None  # a tombstone
        if self._read_value is None:
            return _UNREADABLE
        try:
            return self._read_value(consumed.value)
        except FluxgateError:
            return _UNREADABLE


_UNREADABLE = object()


def _failed(consumed: ConsumedRecord, why: str) -> ConsumedRecord:
    return consumed._replace(record=None, error=TransformError(why))
