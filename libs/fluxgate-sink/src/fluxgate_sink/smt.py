"""Kafka Connect's built-in Single Message Transforms, each as Kafka defines it for a record without a
Connect schema (a decoded record here is a dict, whatever its format): one function per transform
class that reads its config (:class:`Options`) and returns what it does to the operating value (the
key for ``$Key``, the value for ``$Value``). Kafka's own doc of each is cited at its function;
:mod:`fluxgate_sink.transforms` chains them.

A value a transform cannot work on raises :class:`TransformFailed` (Kafka's DataException);
a bad config raises :class:`TransformConfigError` naming the key.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Protocol

from fluxgate_sink.connect_numbers import float32_of_double
from fluxgate_sink.java_dates import DatePatternError, format_datetime, parse_datetime, tokens

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TransformConfigError(ValueError):
    """A transform's config is wrong; the message starts with the key (``transforms.<name>.<option>``)."""


class TransformFailed(ValueError):
    """A record the transform cannot apply to (Kafka's DataException): the record is dead-lettered."""


class Facts(Protocol):
    """What of a record a transform may read besides its operating value."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None


Operate = Callable[[Any, Facts], Any]


class Options:
    """One transform's (or predicate's) config; every error names the full key."""

    def __init__(self, prefix: str, config: Mapping[str, str], known: set[str]) -> None:
        self.prefix, self.config = prefix, config
        for key in config:
            if key not in known:
                raise self.error(key, f"not an option of this class (it has {', '.join(sorted(known)) or 'none'})")

    def error(self, key: str, why: str) -> TransformConfigError:
        return TransformConfigError(f"{self.prefix}.{key}: {why}")

    def text(self, key: str, default: str | None = None) -> str:
        value = self.config.get(key, default)
        if value is None:
            raise self.error(key, "required")
        return value.strip()

    def names(self, key: str) -> list[str]:
        return [item.strip() for item in self.config.get(key, "").split(",") if item.strip()]

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.text(key, default)
        if value not in choices:
            raise self.error(key, f"{value!r}: expected one of {', '.join(choices)}")
        return value

    def flag(self, key: str) -> bool:
        value = self.text(key, "false").lower()
        if value not in ("true", "false"):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value == "true"


# Options of Kafka 3.7+: replace.null.with.default is accepted and changes nothing here (it needs a
# schema's default, and decoded records carry none); field.syntax.version is KIP-821's (below).
NULL_DEFAULT = "replace.null.with.default"
SYNTAX = "field.syntax.version"
_BACKTICK, _DOT, _BACKSLASH = "`", ".", "\\"


def _syntax(options: Options) -> str:
    """KIP-821's ``field.syntax.version``: V1 (the default, a field name at the top level, dots and all)
    or V2 (a nested path), in any case (Kafka's FieldSyntaxVersion.java: a CaseInsensitiveValidString
    of V1 and V2, read upper-cased)."""
    options.flag(NULL_DEFAULT) if NULL_DEFAULT in options.config else None
    version = options.text(SYNTAX, "V1")
    if version.upper() not in ("V1", "V2"):
        raise options.error(SYNTAX, f"{version!r}: expected V1 or V2")
    return version.upper()


def _syntax_v1(options: Options, transform: str) -> None:
    """A transform that reads its fields by top-level name only. KIP-821 proposed V2 paths for it, but
    Kafka's releases (3.8 to 4.x) define field.syntax.version in ExtractField alone (the other
    transforms' changes are unmerged or unreleased, apache/kafka PRs #22235, #22237, #22240): Kafka
    ignores the key there and reads a dotted name as one field. V2 asks for paths, so it is refused
    rather than read another way than the user meant."""
    if _syntax(options) == "V2":
        raise options.error(
            SYNTAX,
            f"V2 (nested field paths) is not supported for {transform}: Kafka's releases read V2 paths in "
            "ExtractField only; use V1 (top-level field names, dots included) or ExtractField",
        )


def field_path(path: str, version: str) -> tuple[str, ...]:
    """A field path's steps. V1: the text is one top-level name. V2 (KIP-821), as Kafka splits it
    (connect/transforms/.../field/SingleFieldPath.java, buildFieldPathV2): dots separate steps; a
    step that opens with a backtick runs to the backtick that closes it (one followed by a dot, or
    the path's last character), so it may hold dots; a backtick followed by anything else is part of
    the name, and a backslash before a backtick followed by a dot escapes it (the backslash dropped);
    a trailing dot adds an empty last step. An unclosed backtick raises ValueError."""
    if version == "V1":
        return (path,)
    steps: list[str] = []
    at = 0
    while at < len(path):
        if path[at] == _BACKTICK:
            step, at = _wrapped_step(path, at)
        else:
            end = path.find(_DOT, at)
            step, at = (path[at:], len(path)) if end < 0 else (path[at:end], end + 1)
        steps.append(step)
    if path.endswith(_DOT):
        steps.append("")
    return tuple(steps)


def _wrapped_step(path: str, opened: int) -> tuple[str, int]:
    """The step opened by the backtick at ``opened``, and where the next one starts."""
    parts: list[str] = []
    start = at = opened + 1
    while True:
        close = path.find(_BACKTICK, at)
        if close < 0:
            break
        escaped = path[close - 1] == _BACKSLASH
        if close == len(path) - 1:  # the path's last character closes it, unless escaped
            if escaped:
                break
            return "".join([*parts, path[start:close]]), close + 1
        if path[close + 1] != _DOT:  # not a closing one: part of the name, look further
            at = close + 1
        elif escaped:  # \` before a dot: a backtick in the name, the backslash dropped
            parts.append(path[start : close - 1] + _BACKTICK)
            start = at = close + 1
        else:
            return "".join([*parts, path[start:close]]), close + 2
    raise ValueError(
        f"incomplete backtick pair in path {path} (the backtick at position {opened}); "
        "a backtick in a name before a dot is written \\`"
    )


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    """Kafka's ``requireMap``: without a schema a transform works on maps (a struct decodes to one)."""
    if not isinstance(value, dict):
        raise TransformFailed(f"only a map or struct can be used for {purpose}, found {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _field_name(spec: str) -> str:
    """InsertField's ``name!`` (required) and ``name?`` (optional) mean the same without a schema."""
    return spec[:-1] if spec.endswith(("!", "?")) else spec


def insert_field(options: Options) -> Operate:
    """InsertField: the record's topic, partition, offset, timestamp and a static text as fields; a
    tombstone passes unchanged (Kafka docs, InsertField; KAFKA-8523)."""
    _syntax_v1(options, "InsertField")
    named = {
        key: _field_name(options.text(f"{key}.field", "")) for key in ("topic", "partition", "offset", "timestamp")
    }
    static_field = _field_name(options.text("static.field", ""))
    static_value = options.config.get("static.value")

    def operate(value: Any, facts: Facts) -> Any:
        if value is None:
            return None
        updated = dict(require_map(value, "field insertion"))
        found = {
            "topic": facts.topic,
            "partition": facts.partition,
            "offset": facts.offset,
            "timestamp": None if facts.timestamp_ms is None else _EPOCH + timedelta(milliseconds=facts.timestamp_ms),
        }
        updated |= {name: found[key] for key, name in named.items() if name}
        if static_field:
            updated[static_field] = static_value
        return updated

    return operate


def replace_field(options: Options) -> Operate:
    """ReplaceField: ``exclude``/``include`` (before Kafka 2.6 ``blacklist``/``whitelist``, still read; the
    new name wins) filter fields by their original names, then ``renames`` (``old:new,...``)."""
    _syntax_v1(options, "ReplaceField")
    exclude = set(options.names("exclude") or options.names("blacklist"))
    include = set(options.names("include") or options.names("whitelist"))
    renames: dict[str, str] = {}
    for pair in options.names("renames"):
        old, colon, new = pair.partition(":")
        if not colon or ":" in new or not old.strip() or not new.strip():
            raise options.error("renames", f"{pair!r}: expected old:new pairs, comma-separated")
        renames[old.strip()] = new.strip()

    def operate(value: Any, facts: Facts) -> Any:
        if value is None:
            return None
        kept = require_map(value, "field replacement")
        return {
            renames.get(name, name): item
            for name, item in kept.items()
            if name not in exclude and (not include or name in include)
        }

    return operate


def extract_field(options: Options) -> Operate:
    """ExtractField: the value becomes one of its fields (null when absent or when the value is null);
    with ``field.syntax.version=V2`` a nested one, by a KIP-821 path (:func:`field_path`), as Kafka
    3.8+'s ExtractField.java reads it (the one released transform that takes V2)."""
    version, field = _syntax(options), options.text("field")
    if not field:
        raise options.error("field", "required")
    try:
        *parents, last = field_path(field, version)
    except ValueError as exc:  # Kafka's ConfigException at configure
        raise options.error("field", str(exc)) from exc

    def operate(value: Any, facts: Facts) -> Any:
        # SingleFieldPath.valueFrom(Map): a missing or null step is null; any other non-map fails.
        current = None if value is None else require_map(value, "field extraction")
        for step in parents:
            if current is None:
                break
            current = _map_or_none(current.get(step), "nested field access")
        return None if current is None else current.get(last)

    return operate


def _map_or_none(value: Any, purpose: str) -> dict[str, Any] | None:
    """Kafka's ``requireMapOrNull``."""
    return None if value is None else require_map(value, purpose)


def hoist_field(options: Options) -> Operate:
    """HoistField: the value, whatever it is (null included), becomes the one field of a new map."""
    _syntax_v1(options, "HoistField")
    field = options.text("field")
    if not field:
        raise options.error("field", "required")
    return lambda value, facts: {field: value}


def value_to_key(options: Options) -> list[str]:
    """ValueToKey's ``fields``: the key becomes a map of these fields of the value (absent ones null)."""
    _syntax_v1(options, "ValueToKey")
    fields = options.names("fields")
    if not fields:
        raise options.error("fields", "required: the value's fields that make the key")
    return fields


_UNIX = {"seconds": -1_000, "milliseconds": 1, "microseconds": 1_000, "nanoseconds": 1_000_000}  # per ms; -: ms per
TARGETS = ("string", "unix", "Date", "Time", "Timestamp")


def timestamp_converter(options: Options) -> Operate:
    """TimestampConverter: a field (or, without ``field``, the whole value) between a text (``format``, a
    SimpleDateFormat pattern, in UTC), unix time (``unix.precision``, milliseconds by default), Date,
    Time and Timestamp. The input's kind is read from its type: a datetime, date or time (what a Connect
    Timestamp, Date or Time decodes to), an integer (unix) or a text (parsed with ``format``)."""
    _syntax_v1(options, "TimestampConverter")
    field = options.text("field", "")
    target = options.choice("target.type", "", TARGETS) if "target.type" in options.config else None
    if target is None:
        raise options.error("target.type", f"required: one of {', '.join(TARGETS)}")
    pattern = options.text("format", "")
    precision = options.choice("unix.precision", "milliseconds", tuple(_UNIX))
    if pattern:
        try:
            tokens(pattern)
        except DatePatternError as exc:
            raise options.error("format", str(exc)) from exc
    elif target == "string":
        raise options.error("format", "required when target.type is string: a SimpleDateFormat pattern")

    def convert(stamp: Any) -> Any:
        if stamp is None:
            return None
        return _to_target(_to_raw(stamp, pattern, precision), target, pattern, precision)

    def operate(value: Any, facts: Facts) -> Any:
        if value is None or not field:
            return convert(value)
        updated = dict(require_map(value, "converting timestamp formats"))
        updated[field] = convert(updated.get(field))
        return updated

    return operate


def _to_raw(stamp: Any, pattern: str, precision: str) -> datetime:
    if isinstance(stamp, datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    if isinstance(stamp, date):
        return datetime(stamp.year, stamp.month, stamp.day, tzinfo=UTC)
    if isinstance(stamp, time):
        return datetime.combine(_EPOCH.date(), stamp, UTC)
    if isinstance(stamp, int) and not isinstance(stamp, bool):
        per = _UNIX[precision]
        return _EPOCH + timedelta(milliseconds=stamp * -per if per < 0 else _truncated(stamp, per))
    if isinstance(stamp, str):
        if not pattern:
            raise TransformFailed("a text timestamp needs format (a SimpleDateFormat pattern) to be parsed")
        try:
            return parse_datetime(pattern, stamp)
        except DatePatternError as exc:
            raise TransformFailed(f"could not parse timestamp: {exc}") from exc
    raise TransformFailed(f"a {_kind(stamp)} is not a timestamp (a Timestamp, unix integer or text)")


def _truncated(dividend: Any, divisor: Any) -> int:
    """Java's integer division (TimeUnit's conversions): the quotient truncated toward zero."""
    quotient = int(abs(dividend) // abs(divisor))
    return -quotient if (dividend < dividend * 0) != (divisor < divisor * 0) else quotient


def _to_target(raw: datetime, target: str, pattern: str, precision: str) -> Any:
    raw = raw.astimezone(UTC)
    if target == "string":
        return format_datetime(pattern, raw)
    if target == "unix":
        millis, per = _truncated(raw - _EPOCH, timedelta(milliseconds=1)), _UNIX[precision]
        return _truncated(millis, -per) if per < 0 else millis * per
    if target == "Date":
        return raw.date()
    if target == "Time":
        return raw.time().replace(microsecond=raw.microsecond // 1000 * 1000)
    return raw


CAST_TYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string")


def cast(options: Options) -> Operate:
    """Cast: ``spec`` ``field:type,...`` casts those fields (a missing one becomes null, as in Kafka), a
    single ``type`` the whole value; types int8 to int64, float32, float64, boolean, string."""
    _syntax_v1(options, "Cast")
    casts: dict[str | None, str] = {}
    spec = options.names("spec")
    if not spec:
        raise options.error("spec", "required: field:type pairs, or one type for the whole value")
    for item in spec:
        parts = item.split(":")
        if len(parts) > 2:
            raise options.error("spec", f"{item!r}: expected field:type")
        kind = parts[-1].strip().lower()
        if kind not in CAST_TYPES:
            raise options.error(
                "spec", f"{item!r}: cannot cast to {parts[-1].strip()!r}; types: {', '.join(CAST_TYPES)}"
            )
        casts[parts[0].strip() if len(parts) == 2 else None] = kind
    if None in casts and len(spec) > 1:
        raise options.error("spec", "a type for the whole value must be the only item of the spec")

    def operate(value: Any, facts: Facts) -> Any:
        if value is None:
            return None
        if None in casts:
            return cast_value(value, casts[None])
        updated = dict(require_map(value, "cast types"))
        for field, kind in casts.items():
            updated[str(field)] = cast_value(updated.get(str(field)), kind)
        return updated

    return operate


_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def cast_value(value: Any, kind: str) -> Any:
    """``value`` as ``kind``, the way Java narrows, parses and prints it (Kafka's Cast)."""
    if value is None:
        return None
    if isinstance(value, (list, dict)):
        raise TransformFailed(f"cannot cast from {'an array' if isinstance(value, list) else 'a map or struct'}")
    if kind == "string":
        return _java_string(value)
    if isinstance(value, (datetime, date, time)):
        value = _logical_number(value)
    if isinstance(value, bytes):
        raise TransformFailed(f"bytes can be cast to string only, not {kind}")
    if isinstance(value, str):
        if kind == "boolean":
            return value.lower() == "true"  # Boolean.parseBoolean: no trimming
        value = _parse_number(value, kind)
    if isinstance(value, bool) or (isinstance(value, Decimal) and kind in (*_BITS, "boolean")):
        value = int(value)  # a BigDecimal narrows by truncating, then wraps like a long
    if kind == "boolean":  # a number's longValue() != 0: 0.5 is false
        return _narrow(value, 64) != 0
    if kind in _BITS:
        return _narrow(value, _BITS[kind])
    number = float(value)
    return float32_of_double(number) if kind == "float32" else number


def _logical_number(value: datetime | date | time) -> int:
    """A Timestamp, Date or Time as Connect stores it: epoch ms, epoch days, ms of the day."""
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
        return (stamp - _EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, date):
        return (value - _EPOCH.date()).days
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _parse_number(text: str, kind: str) -> int | float:
    try:
        if kind in _BITS:
            number = int(text, 10) if re.fullmatch(r"[+-]?\d+", text) else None
            if number is None or not -(2 ** (_BITS[kind] - 1)) <= number < 2 ** (_BITS[kind] - 1):
                raise ValueError(text)
            return number
        return float(text.strip().rstrip("fFdD"))
    except ValueError as exc:
        raise TransformFailed(f"value ({text}) was out of range for requested data type {kind}") from exc


def _narrow(value: int | float | Decimal, bits: int) -> int:
    """Java's narrowing: a fraction truncated, saturated to int (or long), then wrapped to ``bits``."""
    if not isinstance(value, int):
        number = float(value)
        limit = 64 if bits == 64 else 32
        if math.isnan(number):
            return 0
        value = int(max(-(2 ** (limit - 1)), min(2 ** (limit - 1) - 1, math.trunc(number))))
    wrapped = value & ((1 << bits) - 1)
    return wrapped - (1 << bits) if wrapped >= 1 << (bits - 1) else wrapped


def _java_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):  # Connect's Values.dateFormatFor: ISO 8601 in UTC
        return format_datetime("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return format_datetime("HH:mm:ss.SSS'Z'", datetime.combine(_EPOCH.date(), value, UTC))
    return str(value)


def _java_double(number: float) -> str:
    """Double.toString: plain between 10^-3 and 10^7, else computerized scientific notation (1.0E10)."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0 or 1e-3 <= abs(number) < 1e7:
        return repr(number)  # plain in this range, with the shortest digits that read back
    exact = Decimal(repr(number))
    sign, digits, _ = exact.as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{exact.adjusted()}"
