"""A record writer compiled once from a parsed Avro schema, for the types our schemas use.

fastavro's ``schemaless_writer`` interprets the schema on every call (unions resolved,
logical types prepared, enums searched): about 5 µs for a ``SensorReading``, the largest
single cost of a gateway's message after JSON parsing. Compiled per field, with the
encodings of repeated strings (devices, metrics, sources) remembered, it is a fraction
of that. It covers strings, doubles, longs (also ``timestamp-millis`` as an int), ints,
booleans, bytes, enums, maps of strings, arrays of any of these and ``["null", <one of
those>]`` unions; :func:`compile_record` returns None for any other schema. (A
``CoapMessage`` took 60 µs to convert, mostly in fastavro, before ints, booleans, bytes and
arrays were in.) A value it does not expect (a wrong type, a missing field, a long out of
range) raises :class:`Unexpected`, and the caller lets fastavro encode that record, so the
bytes and the errors are always fastavro's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

Writer = Callable[[Any, list[bytes]], None]
_DOUBLE = struct.Struct("<d")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
MAX_REMEMBERED = 65_536  # encoded strings kept; forgotten all at once when full


class Unexpected(Exception):
    """A value the compiled writer does not handle: encode the record with fastavro instead."""


def compile_record(parsed: Any) -> Callable[[dict[str, Any]], bytes] | None:
    """A function from a record dict to its Avro body, or None if the schema is out of scope."""
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return None
    fields: list[tuple[str, Writer]] = []
    for field in parsed["fields"]:
        writer = _writer(field["type"])
        if writer is None:
            return None
        fields.append((field["name"], writer))

    def write(record: dict[str, Any]) -> bytes:
        parts: list[bytes] = []
        try:
            for name, field_writer in fields:
                field_writer(record[name], parts)
        except (KeyError, TypeError, AttributeError, UnicodeEncodeError) as exc:
            raise Unexpected(str(exc)) from exc
        return b"".join(parts)

    return write


def _writer(schema: Any) -> Writer | None:
    if isinstance(schema, list):
        return _nullable(schema)
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(schema, dict) and kind == "enum":
        return _enum(schema["symbols"])
    if isinstance(schema, dict) and kind == "map":
        return _string_map if schema["values"] == "string" else None
    if isinstance(schema, dict) and kind == "array":
        items = _writer(schema["items"])
        return None if items is None else _array(items)
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if kind == "long" and logical in (None, "timestamp-millis"):
        return _long_field()
    return _PLAIN.get(kind) if logical is None and isinstance(kind, str) else None


def _nullable(branches: list[Any]) -> Writer | None:
    if len(branches) != 2 or branches[0] != "null":
        return None
    inner = _writer(branches[1])
    if inner is None:
        return None

    def write(value: Any, parts: list[bytes]) -> None:
        if value is None:
            parts.append(b"\x00")
        else:
            parts.append(b"\x02")
            inner(value, parts)

    return write


def _enum(symbols: list[str]) -> Writer:
    encoded = {symbol: zigzag(index) for index, symbol in enumerate(symbols)}

    def write(value: Any, parts: list[bytes]) -> None:
        try:
            parts.append(encoded[value])
        except (KeyError, TypeError) as exc:
            raise Unexpected(f"{value!r} is not a symbol") from exc

    return write


_remembered: dict[str, bytes] = {}
_ONE_BYTE = [bytes((number,)) for number in range(0x80)]


def _string(value: Any, parts: list[bytes]) -> None:
    encoded = _remembered.get(value) if type(value) is str else None
    if encoded is None:
        if type(value) is not str:
            raise Unexpected(f"{type(value).__name__} is not a string")
        body = value.encode()
        encoded = zigzag(len(body)) + body
        if len(_remembered) >= MAX_REMEMBERED:
            _remembered.clear()
        _remembered[value] = encoded
    parts.append(encoded)


def _double(value: Any, parts: list[bytes]) -> None:
    if type(value) is not float:
        raise Unexpected(f"{type(value).__name__} is not a float")
    parts.append(_DOUBLE.pack(value))


def _long(value: Any, parts: list[bytes]) -> None:
    if type(value) is not int or not _LONG_MIN <= value <= _LONG_MAX:
        raise Unexpected(f"{value!r} is not a 64-bit int")
    parts.append(zigzag(value))


def _long_field() -> Writer:
    """A long field's writer that remembers its last value's encoding: a gateway stamps every
    record of a batch with the same ingest time, a 6-byte varint built in a Python loop."""
    last: list[Any] = [None, b""]

    def write(value: Any, parts: list[bytes]) -> None:
        if value == last[0] and type(value) is int:
            parts.append(last[1])
            return
        _long(value, parts)
        last[0], last[1] = value, parts[-1]

    return write


def _int(value: Any, parts: list[bytes]) -> None:
    if type(value) is not int or not _INT_MIN <= value <= _INT_MAX:
        raise Unexpected(f"{value!r} is not a 32-bit int")
    parts.append(zigzag(value))


def _boolean(value: Any, parts: list[bytes]) -> None:
    if type(value) is not bool:
        raise Unexpected(f"{type(value).__name__} is not a bool")
    parts.append(b"\x01" if value else b"\x00")


def _bytes(value: Any, parts: list[bytes]) -> None:
    if type(value) is not bytes:
        raise Unexpected(f"{type(value).__name__} is not bytes")
    parts.append(zigzag(len(value)))
    parts.append(value)


def _array(items: Writer) -> Writer:
    def write(value: Any, parts: list[bytes]) -> None:
        if type(value) is not list:
            raise Unexpected(f"{type(value).__name__} is not a list")
        if value:
            parts.append(zigzag(len(value)))
            for item in value:
                items(item, parts)
        parts.append(b"\x00")

    return write


def _string_map(value: Any, parts: list[bytes]) -> None:
    if type(value) is not dict:
        raise Unexpected(f"{type(value).__name__} is not a dict")
    if value:
        parts.append(zigzag(len(value)))
        for key, item in value.items():
            _string(key, parts)
            _string(item, parts)
    parts.append(b"\x00")


_PLAIN: dict[str, Writer] = {
    "string": _string,
    "double": _double,
    "int": _int,
    "boolean": _boolean,
    "bytes": _bytes,
}


def zigzag(value: int) -> bytes:
    """An Avro ``long``: zig-zag, then 7 bits a byte, least significant first."""
    global _last_high
    number = (value << 1) ^ (value >> 63)
    if number < 0x80:
        return _ONE_BYTE[number]
    # Event times of one stream share all but their low 21 bits (35 minutes of milliseconds):
    # the bytes of the high part are those of the last value's when it is the same, and the
    # three low bytes (continued, as more follow) are packed at once instead of looped.
    high = number >> 21
    remembered = _last_high  # one tuple: read and replaced whole
    if high and high == remembered[0]:
        return (
            bytes(((number & 0x7F) | 0x80, (number >> 7 & 0x7F) | 0x80, (number >> 14 & 0x7F) | 0x80)) + remembered[1]
        )
    encoded = _varint(number)
    if high:
        _last_high = (high, encoded[3:])
    return encoded


def _varint(number: int) -> bytes:
    out = bytearray()
    while number >= 0x80:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


_last_high: tuple[int, bytes] = (0, b"")  # zigzag's high part (above 21 bits) and its bytes
