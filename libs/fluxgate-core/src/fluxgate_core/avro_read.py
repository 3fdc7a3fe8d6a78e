"""A record reader generated once per (writer, reader) schema pair, the counterpart of avro_fast.

fastavro's ``schemaless_reader`` interprets both schemas on every call (a file object, a
reader function looked up per value, schema matching per union and record): about 9 µs for
a ``TemperatureAggregate`` here. :func:`compile_reader` instead writes the Python source of
one function for the pair, straight-line for records, with every schema decision taken
once, and ``exec``s it. Each value is read from the bytes at an offset, one-byte varints
and lengths inline, runs of doubles with one ``struct`` call, enums through a table.
Timestamps, the costly part (fastavro builds each datetime as ``epoch + timedelta``), go
through :mod:`fluxgate_core.avro_time`.

Schema resolution follows fastavro's rules for the cases a registry subject holds (fields
added with defaults or removed, promotions, unions on either side, enum symbols, nested
records, arrays, maps). The rest falls back to fastavro: ``compile_reader`` returns None
for schemas it does not cover (aliases, recursive types, logical types other than
timestamps, arrays of nulls), and the generated code raises :class:`Fallback` wherever
fastavro would raise or where a value takes a path it does not cover (a union branch past
63, an over-long varint, anything truncated), so that the caller decodes that record with
fastavro and the result or the error is always fastavro's. One exception: a block count past
the bytes left raises :class:`Refused`, never handed to fastavro, which loops through it.
"""

from __future__ import annotations

import copy
import json
import struct
from collections.abc import Callable
from typing import Any

from fluxgate_core.avro_time import TIME_HELPERS, timestamp_millis_code

Reader = Callable[[bytes, int], dict[str, Any]]
_NUMERIC = {"int": 0, "long": 1, "float": 2, "double": 3}
_PRIMITIVE = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class Fallback(Exception):
    """The generated reader does not decode this record the way fastavro would: use fastavro."""


class Refused(ValueError):
    """A body no reader should be handed: a block count past the bytes left. fastavro reads such
    a count item by item, and items that take no bytes (a fixed of size 0, a record of those)
    never run out, so one damaged or hostile varint holds a decoder for as long as it says,
    memory growing (a test's worker reached 18 GB). Java's Avro caps collections likewise
    (SystemLimitException); any other count past the bytes left fails in fastavro anyway."""


class _Unsupported(Exception):
    """The schema pair is out of scope: no reader is generated."""


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint from ``pos``, and the position after it; :class:`Fallback` past 64 bits."""
    number = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        number |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 63:
            raise Fallback("varint longer than 10 bytes")
    if number >= 1 << 64:
        raise Fallback("varint past 64 bits")
    return (number >> 1) ^ -(number & 1), pos


def read_length(data: bytes, pos: int) -> tuple[int, int]:
    """A non-negative length (of bytes, a string or a block)."""
    length, pos = read_long(data, pos)
    if length < 0:
        raise Fallback("negative length")
    return length, pos


_HELPERS: dict[str, Any] = {
    "_long": read_long,
    "_len": read_length,
    "_Fallback": Fallback,
    "_Refused": Refused,
    "_copy": copy.deepcopy,
    **TIME_HELPERS,
}


def compile_reader(writer: Any, reader: Any = None) -> Reader | None:
    """A function ``(data, pos) -> record`` for bodies written with ``writer``, read as ``reader``.

    Both are schemas parsed by ``fastavro.parse_schema``; ``reader`` None reads with the
    writer's own schema. None when the pair is out of scope (decode with fastavro then).
    """
    try:
        source, constants = _Generator(writer, reader).source()
    except _Unsupported:
        return None
    namespace: dict[str, Any] = {**_HELPERS, **constants}
    exec(compile(source, f"<avro reader {_name(writer)}>", "exec"), namespace)  # noqa: S102 - our own source
    function: Reader = namespace["read"]
    return function


def _name(schema: Any) -> str:
    return str(schema.get("name", "record")) if isinstance(schema, dict) else "record"


class _Generator:
    """Writes the source of one reader function, one statement at a time."""

    def __init__(self, writer: Any, reader: Any) -> None:
        if not isinstance(writer, dict) or writer.get("type") != "record":
            raise _Unsupported("not a record")
        if reader is not None and '"aliases"' in json.dumps(reader):
            raise _Unsupported("aliases: fastavro matches names through them")
        self._writer, self._reader = writer, reader
        self._named = {"w": _named_types(writer), "r": _named_types(reader)}
        self._lines: list[str] = []
        self._constants: dict[str, Any] = {}
        self._counter = 0
        self._active: set[str] = set()

    def source(self) -> tuple[str, dict[str, Any]]:
        self._emit(0, "def read(d, p):")
        result = self._value(self._writer, self._reader, 1)
        self._emit(1, "if p > len(d):")
        self._emit(2, "raise _Fallback('truncated')")
        self._emit(1, f"return {result}")
        return "\n".join(self._lines) + "\n", self._constants

    def _emit(self, indent: int, line: str) -> None:
        self._lines.append("    " * indent + line)

    def _var(self, prefix: str = "v") -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def _constant(self, value: Any, prefix: str = "K") -> str:
        name = self._var(f"_{prefix}")
        self._constants[name] = value
        return name

    def _fail(self, indent: int, why: str) -> str:
        self._emit(indent, f"raise _Fallback({why!r})")
        return "None"

    def _resolve(self, schema: Any, side: str) -> Any:
        """A named type's definition for its reference; any other schema as it is."""
        if isinstance(schema, str) and schema not in _PRIMITIVE:
            if schema not in self._named[side]:
                raise _Unsupported(f"unknown type {schema}")
            return self._named[side][schema]
        return schema

    def _matches(self, writer: Any, reader: Any) -> bool:
        """fastavro's ``match_types``: may ``writer`` be read as ``reader``."""
        writer, reader = self._resolve(writer, "w"), self._resolve(reader, "r")
        if isinstance(writer, list) or isinstance(reader, list):
            return True
        kind, target = _kind(writer), _kind(reader)
        if kind in ("record", "enum", "fixed") and kind == target:
            return _short(writer["name"]) == _short(reader["name"])
        if kind == target == "array":
            return self._matches(writer["items"], reader["items"])
        if kind == target == "map":
            return self._matches(writer["values"], reader["values"])
        return kind == target or (kind, target) in _PROMOTIONS

    def _value(self, writer: Any, reader: Any, indent: int) -> str:
        """Emit code reading one value; return the expression (a variable) holding it."""
        writer = self._resolve(writer, "w")
        reader = self._resolve(reader, "r") if reader is not None else None
        if isinstance(writer, list):
            return self._writer_union(writer, reader, indent)
        if isinstance(reader, list):
            branch = next((b for b in reader if self._matches(writer, b)), None)
            if branch is None:
                return self._fail(indent, "no reader branch for the writer's type")
            return self._value(writer, branch, indent)
        kind = _kind(writer)
        if reader is not None and not self._matches(writer, reader):
            return self._fail(indent, f"{kind} does not resolve to {_kind(reader)}")
        if kind == "record":
            return self._record(writer, reader, indent)
        if kind in ("enum", "array", "map", "fixed"):
            method: Callable[[Any, Any, int], str] = getattr(self, f"_{kind}")
            return method(writer, reader, indent)
        return self._primitive(writer, reader, indent)

    def _primitive(self, writer: Any, reader: Any, indent: int) -> str:
        kind = _kind(writer)
        logical = writer.get("logicalType") if isinstance(writer, dict) else None
        out = self._var()
        if logical is not None:
            if kind != "long" or logical not in ("timestamp-millis", "timestamp-micros"):
                raise _Unsupported(f"logical type {logical} on {kind}")
            for line_indent, line in timestamp_millis_code(out, logical == "timestamp-micros"):
                self._emit(indent + line_indent, line)
            return out  # fastavro applies the writer's logical type, whatever the reader says
        if kind == "null":
            self._emit(indent, f"{out} = None")
        elif kind == "boolean":
            self._emit(indent, f"{out} = d[p] != 0")
            self._emit(indent, "p += 1")
        elif kind in ("int", "long"):
            self._long(out, indent)
        elif kind in ("float", "double"):
            self._doubles([out], kind, indent)
        else:  # bytes, string
            self._bytes(out, indent)
            if kind == "string":
                self._emit(indent, f"{out} = {out}.decode()")
        return self._promote(out, kind, _kind(reader) if reader is not None else kind, indent)

    def _promote(self, value: str, kind: str, target: str, indent: int) -> str:
        if kind in ("int", "long") and target in ("float", "double"):
            self._emit(indent, f"{value} = float({value})")
        elif kind == "string" and target == "bytes":
            self._emit(indent, f"{value} = {value}.encode()")
        elif kind == "bytes" and target == "string":
            self._emit(indent, f"{value} = {value}.decode()")
        return value

    def _long(self, out: str, indent: int) -> None:
        """One- and two-byte varints inline (counts, small numbers, enum-like codes); longer ones call."""
        self._emit(indent, "b = d[p]")
        self._emit(indent, "if b < 128:")
        self._emit(indent + 1, f"{out} = (b >> 1) ^ -(b & 1)")
        self._emit(indent + 1, "p += 1")
        self._emit(indent, "elif d[p + 1] < 128:")
        self._emit(indent + 1, "b = (b & 127) | d[p + 1] << 7")
        self._emit(indent + 1, f"{out} = (b >> 1) ^ -(b & 1)")
        self._emit(indent + 1, "p += 2")
        self._emit(indent, "else:")
        self._emit(indent + 1, f"{out}, p = _long(d, p)")

    def _bytes(self, out: str, indent: int) -> None:
        self._emit(indent, "b = d[p]")
        self._emit(indent, "if b < 128 and not b & 1:")
        self._emit(indent + 1, "q = p + 1 + (b >> 1)")
        self._emit(indent + 1, f"{out} = d[p + 1 : q]")
        self._emit(indent, "else:")
        self._emit(indent + 1, "b, p = _len(d, p)")
        self._emit(indent + 1, "q = p + b")
        self._emit(indent + 1, f"{out} = d[p:q]")
        self._emit(indent, "p = q")

    def _doubles(self, outs: list[str], kind: str, indent: int) -> None:
        size = 8 if kind == "double" else 4
        layout = self._constant(struct.Struct(f"<{len(outs)}{kind[0]}").unpack_from, "S")
        self._emit(indent, f"{', '.join(outs)}, = {layout}(d, p)")
        self._emit(indent, f"p += {size * len(outs)}")

    def _enum(self, writer: Any, reader: Any, indent: int) -> str:
        symbols = writer["symbols"]
        if reader is not None and _short(writer["name"]) != _short(reader["name"]):
            return self._fail(indent, "enum names differ")
        table: dict[int, str] = {}
        for index, symbol in enumerate(symbols[:64]):
            if reader is None or symbol in reader["symbols"]:
                table[index << 1] = symbol
            elif reader.get("default"):
                table[index << 1] = reader["default"]
        out = self._var()
        # A byte missing from the table (index past 63, a negative index, a symbol the
        # reader lacks and has no default for) raises KeyError: fastavro decides then.
        self._emit(indent, f"{out} = {self._constant(table, 'E')}[d[p]]")
        self._emit(indent, "p += 1")
        return out

    def _fixed(self, writer: Any, reader: Any, indent: int) -> str:
        if reader is not None and (
            reader["size"] != writer["size"] or _short(reader["name"]) != _short(writer["name"])
        ):
            return self._fail(indent, "fixed types differ")
        out = self._var()
        self._emit(indent, f"{out} = d[p : p + {writer['size']}]")
        self._emit(indent, f"p += {writer['size']}")
        return out

    def _writer_union(self, writer: list[Any], reader: Any, indent: int) -> str:
        out = self._var()
        self._emit(indent, "b = d[p]")
        self._emit(indent, "p += 1")
        for index, branch in enumerate(writer[:64]):
            self._emit(indent, f"{'if' if index == 0 else 'elif'} b == {index << 1}:")
            target = reader
            if isinstance(reader, list):
                target = next((r for r in reader if self._matches(branch, r)), None)
                if target is None:
                    self._fail(indent + 1, "union branch missing from the reader's union")
                    continue
            elif reader is not None and not self._matches(branch, reader):
                self._fail(indent + 1, "union branch does not resolve to the reader's type")
                continue
            value = self._value(branch, target, indent + 1)
            self._emit(indent + 1, f"{out} = {value}")
        self._emit(indent, "else:")
        self._fail(indent + 1, "union index out of range")
        return out

    def _record(self, writer: Any, reader: Any, indent: int) -> str:
        name = writer["name"]
        if name in self._active:
            raise _Unsupported(f"recursive type {name}")
        if reader is not None and _short(reader["name"]) != _short(name):
            return self._fail(indent, "record names differ")
        self._active.add(name)
        wanted = {f["name"]: f for f in reader["fields"]} if reader is not None else None
        items = self._fields(writer["fields"], wanted, indent)
        for field in (wanted or {}).values():
            items.append((field["name"], self._default(field, indent)))
        self._active.discard(name)
        out = self._var("r")
        self._emit(indent, f"{out} = {{{', '.join(f'{k!r}: {v}' for k, v in items)}}}")
        return out

    def _fields(
        self, fields: list[dict[str, Any]], wanted: dict[str, Any] | None, indent: int
    ) -> list[tuple[str, str]]:
        """Read the writer's fields in order; ``wanted`` loses each reader field that was read."""
        items: list[tuple[str, str]] = []
        run: list[tuple[str, str]] = []
        for field in [*fields, {"name": None, "type": "null"}]:  # the end flushes a last run
            kind = _kind(self._resolve(field["type"], "w"))
            target = wanted.pop(field["name"], None) if wanted is not None and field["name"] else None
            skipped = wanted is not None and target is None
            same = target is None or self._resolve(target["type"], "r") == field["type"]
            if kind in ("double", "float") and not skipped and same and not isinstance(field["type"], dict):
                if run and _kind(run[0][1]) != kind:
                    items += self._flush(run, indent)
                run.append((field["name"], kind))
                continue
            items += self._flush(run, indent)
            if field["name"] is None:
                break
            value = self._value(field["type"], target["type"] if target else None, indent)
            if not skipped:
                items.append((field["name"], value))
        return items

    def _flush(self, run: list[tuple[str, str]], indent: int) -> list[tuple[str, str]]:
        """Read a run of same-kind floating-point fields with one ``struct`` call."""
        if not run:
            return []
        outs = [self._var() for _ in run]
        self._doubles(outs, run[0][1], indent)
        items = [(name, out) for (name, _), out in zip(run, outs, strict=True)]
        run.clear()
        return items

    def _default(self, field: dict[str, Any], indent: int) -> str:
        if "default" not in field:
            return self._fail(indent, f"no default for {field['name']}")
        default = field["default"]
        if isinstance(default, dict | list):
            return f"_copy({self._constant(default, 'D')})"
        return self._constant(default, "D")

    def _array(self, writer: Any, reader: Any, indent: int) -> str:
        items = self._resolve(writer["items"], "w")
        if items == "null":
            raise _Unsupported("array of nulls")
        out = self._var("a")

        def item(inner: int) -> None:
            value = self._value(writer["items"], reader["items"] if reader else None, inner)
            self._emit(inner, f"{out}.append({value})")

        self._emit(indent, f"{out} = []")
        self._blocks(indent, item)
        return out

    def _map(self, writer: Any, reader: Any, indent: int) -> str:
        out = self._var("m")

        def item(inner: int) -> None:
            key = self._var("k")
            self._bytes(key, inner)
            value = self._value(writer["values"], reader["values"] if reader else None, inner)
            self._emit(inner, f"{out}[{key}.decode()] = {value}")

        self._emit(indent, f"{out} = {{}}")
        self._blocks(indent, item)
        return out

    def _blocks(self, indent: int, item: Callable[[int], None]) -> None:
        count = self._var("n")
        self._emit(indent, "while True:")
        self._long(count, indent + 1)
        self._emit(indent + 1, f"if {count} == 0:")
        self._emit(indent + 2, "break")
        self._emit(indent + 1, f"if {count} < 0:")
        self._emit(indent + 2, f"{count} = -{count}")
        self._emit(indent + 2, "b, p = _long(d, p)")  # the block's size in bytes, not needed
        # More items than bytes left (and more than a few thousand): a damaged count, which
        # items of no bytes would loop through for as long as it says, in fastavro too: refused.
        self._emit(indent + 1, f"if {count} > len(d) - p and {count} > 65536:")
        self._emit(indent + 2, f"raise _Refused(f'a block of {{{count}}} items, past the {{len(d) - p}} bytes left')")
        self._emit(indent + 1, f"for _ in range({count}):")
        item(indent + 2)


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema["type"])
    return str(schema)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _named_types(schema: Any) -> dict[str, Any]:
    return dict(schema.get("__named_schemas", {})) if isinstance(schema, dict) else {}


_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double")}
_PROMOTIONS |= {("float", "double"), ("string", "bytes"), ("bytes", "string")}
