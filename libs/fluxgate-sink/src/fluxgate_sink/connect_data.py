"""A JSON payload read through its Kafka Connect schema, as JsonConverter reads the payload of a
``{"schema", "payload"}`` envelope (``convertToConnect``): its types checked, optional fields, defaults,
the logical types Timestamp, Date, Time and Decimal. Values become what the Avro decoder gives for the
same data (a datetime in UTC for a Timestamp, a date, a time, a Decimal, bytes), so no sink needs code
of its own for JSON records.

Where JsonConverter coerces a node into its schema's type (``intValue()`` of ``2.5`` or of a text, a
wrapped int32 or int64), we dead-letter the record instead, the reason naming the field: a silently
changed value is worse than a dead letter. The integer bounds are the ones our gateways write by
(:data:`fluxgate_core.json_records.CONNECT_INTEGER_RANGES`).

A node that does not fit its schema raises :class:`SerializationError` (never retriable), naming
its path (``payload.site.room``).
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from fluxgate_core.errors import SerializationError
from fluxgate_core.json_records import CONNECT_INTEGER_RANGES

DECIMAL = "org.apache.kafka.connect.data.Decimal"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Schema = Mapping[str, Any]
Convert = Callable[[Schema, Any, str], Any]


def convert(schema: Schema, node: Any, path: str) -> Any:
    """``node`` (parsed JSON) read through the Connect ``schema``; the error names ``path``."""
    kind = schema.get("type")
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        raise SerializationError(f"{path}: unknown schema type {kind!r}")
    if node is None:
        if schema.get("default") is not None:
            return convert({**schema, "default": None}, schema["default"], path)
        if schema.get("optional") is True:
            return None
        raise SerializationError(f"{path}: null for a required {kind} field")
    value = reader(schema, node, path)
    logical = _LOGICAL.get(str(schema.get("name")))
    return logical(schema, value, path) if logical else value


# Deliberately stricter than JsonConverter.java's TO_CONNECT_CONVERTERS, which take intValue(),
# longValue() or booleanValue() of whatever node they find: 2.5 as 2, 2**31 in an int32 wrapped to
# -2**31, the text "3" as 0, "true" as false. Such a record is dead-lettered with the field's path.
def _integer(low: int, high: int) -> Convert:
    def read(schema: Schema, node: Any, path: str) -> int:
        if type(node) is not int or not low <= node <= high:
            raise _mismatch(schema, node, path)
        return node

    return read


def _number(schema: Schema, node: Any, path: str) -> float:
    if type(node) not in (int, float, Decimal):  # a Decimal: parsed exactly for a Decimal elsewhere
        raise _mismatch(schema, node, path)
    return float(node)  # float(Decimal) rounds as float(text) does: the double JsonConverter reads


def _of(python_type: type) -> Convert:
    def read(schema: Schema, node: Any, path: str) -> Any:
        if type(node) is not python_type:
            raise _mismatch(schema, node, path)
        return node

    return read


def _bytes(schema: Schema, node: Any, path: str) -> bytes | Decimal:
    if schema.get("name") == DECIMAL and type(node) in (int, float, Decimal):  # decimal.format NUMERIC's number
        return node if type(node) is Decimal else Decimal(str(node))  # BigDecimal, every digit (JsonConverter.java)
    if type(node) is not str:
        raise _mismatch(schema, node, path)
    try:
        return b64decode(node, validate=True)
    except binascii.Error as exc:
        raise SerializationError(f"{path}: bytes must be base64: {exc}") from exc


def _array(schema: Schema, node: Any, path: str) -> list[Any]:
    items = schema.get("items")
    if not isinstance(items, dict):
        raise SerializationError(f"{path}: the array schema names no items schema")
    if type(node) is not list:
        raise _mismatch(schema, node, path)
    return [convert(items, item, f"{path}[{index}]") for index, item in enumerate(node)]


def _map(schema: Schema, node: Any, path: str) -> dict[Any, Any]:
    keys, values = schema.get("keys"), schema.get("values")
    if not isinstance(keys, dict) or not isinstance(values, dict):
        raise SerializationError(f"{path}: the map schema needs keys and values schemas")
    if keys.get("type") == "string":  # string keys: a JSON object; any other: a list of [key, value] pairs
        if type(node) is not dict:
            raise _mismatch(schema, node, path)
        return {key: convert(values, item, f"{path}.{key}") for key, item in node.items()}
    if type(node) is not list or not all(type(pair) is list and len(pair) == 2 for pair in node):
        raise SerializationError(f"{path}: a map with non-string keys must be a JSON array of [key, value] pairs")
    try:
        return {convert(keys, k, f"{path} key"): convert(values, v, f"{path}[{k!r}]") for k, v in node}
    except TypeError as exc:  # a key that is an array or an object: Python has no such dict key
        raise SerializationError(f"{path}: a map key must be a string, number or boolean here: {exc}") from exc


def _struct(schema: Schema, node: Any, path: str) -> dict[str, Any]:
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise SerializationError(f'{path}: the struct schema\'s "fields" is not an array')
    if type(node) is not dict:
        raise _mismatch(schema, node, path)
    struct: dict[str, Any] = {}
    for field in fields:
        name = field.get("field") if isinstance(field, dict) else None
        if not isinstance(name, str):
            raise SerializationError(f'{path}: a struct field\'s schema has no name ("field")')
        struct[name] = convert(field, node.get(name), f"{path}.{name}")  # fields not in the schema are dropped
    return struct


_READERS: dict[str, Convert] = {
    "boolean": _of(bool),
    **{kind: _integer(low, high) for kind, (low, high) in CONNECT_INTEGER_RANGES.items()},  # the writer's bounds
    "float": _number,  # Connect's float32
    "double": _number,  # float64
    "float32": _number,  # the names a hand-written envelope often uses
    "float64": _number,
    "string": _of(str),
    "bytes": _bytes,
    "array": _array,
    "map": _map,
    "struct": _struct,
}


def _timestamp(schema: Schema, value: Any, path: str) -> datetime:
    if type(value) is not int:
        raise SerializationError(f"{path}: a Timestamp is int64 epoch milliseconds, got {json_kind(value)}")
    return _EPOCH + timedelta(milliseconds=value)


def _date(schema: Schema, value: Any, path: str) -> date:
    if type(value) is not int:
        raise SerializationError(f"{path}: a Date is int32 days since the epoch, got {json_kind(value)}")
    return _EPOCH.date() + timedelta(days=value)


def _time(schema: Schema, value: Any, path: str) -> time:
    if type(value) is not int or not 0 <= value < 86_400_000:
        raise SerializationError(f"{path}: a Time is int32 milliseconds of a day, got {value!r}")
    return (datetime.min + timedelta(milliseconds=value)).time()


def _decimal(schema: Schema, value: Any, path: str) -> Decimal:
    if isinstance(value, Decimal):
        return value
    parameters = schema.get("parameters")
    scale = parameters.get("scale") if isinstance(parameters, dict) else None
    if not isinstance(scale, str) or not scale.lstrip("-").isdigit():
        raise SerializationError(f"{path}: a Decimal's schema needs its scale (parameters.scale)")
    unscaled = int.from_bytes(value, "big", signed=True)  # two's complement, as BigInteger writes it
    return Decimal(unscaled).scaleb(-int(scale))


_LOGICAL: dict[str, Convert] = {
    "org.apache.kafka.connect.data.Timestamp": _timestamp,
    "org.apache.kafka.connect.data.Date": _date,
    "org.apache.kafka.connect.data.Time": _time,
    DECIMAL: _decimal,
}


def _mismatch(schema: Schema, node: Any, path: str) -> SerializationError:
    return SerializationError(f"{path}: expected {schema.get('type')}, got {json_kind(node)}")


def json_kind(value: Any) -> str:
    """What ``value`` (parsed JSON) is, in an error's reason: "an object", "a string", "a number", ..."""
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        Decimal: "a number",
    }
    if value is None:
        return "null (a tombstone or an empty value)"
    return names.get(type(value), "a number" if isinstance(value, float) else type(value).__name__)
