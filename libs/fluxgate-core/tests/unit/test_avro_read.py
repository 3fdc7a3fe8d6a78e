"""The compiled Avro reader decodes exactly what fastavro decodes, or lets fastavro decide.

Schemas are generated too: every type our reader handles, nested, and reader schemas
derived from writer schemas the way a registry subject evolves (fields added with
defaults or removed, promotions, unions, enum symbols). Every schema in ``schemas/`` is
checked the same way.
"""

from __future__ import annotations

import io
import json
import math
from functools import cache
from itertools import count
from typing import Any

import fastavro
import pytest
from fluxgate_testing.avro_spec import spec_long
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxgate_core.avro_read import Refused, compile_reader
from fluxgate_core.errors import SerializationError
from fluxgate_core.schemas import schema_dict, schemas_dir
from fluxgate_core.serde import AvroDecoder

_LONG = st.integers(-(2**63), 2**63 - 1)
_INT = st.integers(-(2**31), 2**31 - 1)
_MILLIS = (
    st.integers(-(2**62) // 1000, 2**62 // 1000)
    | st.integers(0, 253_402_300_799_999)
    | st.sampled_from([0, 63, 64, 2**34, 2**41 - 1, 2**41])
)
_names = count()
_TIMESTAMP_MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
_TIMESTAMP_MICROS = {"type": "long", "logicalType": "timestamp-micros"}
_PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
_LEAVES = st.sampled_from([*_PRIMITIVES, _TIMESTAMP_MILLIS, _TIMESTAMP_MICROS])


def _fresh(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


def _named(kind: str) -> st.SearchStrategy[Any]:
    if kind == "enum":
        symbols = st.lists(st.sampled_from("ABCDEFGHIJ"), min_size=1, max_size=6, unique=True)
        return symbols.map(lambda s: {"type": "enum", "name": _fresh("E"), "symbols": s})
    return st.integers(0, 20).map(lambda size: {"type": "fixed", "name": _fresh("F"), "size": size})


def _union(branches: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """A union of types that Avro allows together: no two of one unnamed kind, no union in it."""

    def kind(schema: Any) -> str:
        return schema["type"] if isinstance(schema, dict) and schema["type"] in ("array", "map") else json.dumps(schema)

    return st.lists(branches.filter(lambda b: not isinstance(b, list)), min_size=1, max_size=4, unique_by=kind)


def _schemas(depth: int = 2) -> st.SearchStrategy[Any]:
    leaves = _LEAVES | _named("enum") | _named("fixed")
    if depth == 0:
        return leaves
    inner = _schemas(depth - 1)
    return st.one_of(
        leaves,
        leaves,
        # Items of at least one byte: under a damaged count fastavro loops through items of none
        # (test_a_damaged_count_of_items_without_bytes_is_refused_not_looped_through), and it is
        # the reference these tests ask, for bodies the compiled reader hands over.
        inner.filter(lambda s: not _takes_no_bytes(s)).map(lambda s: {"type": "array", "items": s}),
        inner.map(lambda s: {"type": "map", "values": s}),
        _union(inner),
        _records(inner),
    )


def _takes_no_bytes(schema: Any) -> bool:
    """Whether a value of ``schema`` may encode in no bytes: null, a fixed of size 0, a record of those."""
    if schema == "null":
        return True
    if isinstance(schema, dict) and schema["type"] == "fixed":
        return bool(schema["size"] == 0)
    if isinstance(schema, dict) and schema["type"] == "record":
        return all(_takes_no_bytes(field["type"]) for field in schema["fields"])
    return False


def _records(fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(fields, min_size=1, max_size=6).map(
        lambda types: {
            "type": "record",
            "name": _fresh("R"),
            "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(types)],
        }
    )


def _values(schema: Any, named: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    """Values that fastavro writes for ``schema`` (timestamps as ints, as our writers give them)."""
    named = schema.get("__named_schemas", {}) if named is None and isinstance(schema, dict) else named or {}
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        return st.one_of([_values(branch, named) for branch in schema])
    kind = schema["type"] if isinstance(schema, dict) else schema
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    simple: dict[str, st.SearchStrategy[Any]] = {
        "null": st.none(),
        "boolean": st.booleans(),
        "int": _INT,
        "long": _MILLIS if logical == "timestamp-millis" else _LONG,
        "float": st.floats(width=32),
        "double": st.floats() | st.sampled_from([math.nan, math.inf, -math.inf, -0.0]),
        "bytes": st.binary(max_size=20),
        "string": st.text(max_size=20),
    }
    if logical == "timestamp-micros":
        return st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999)
    if kind in simple:
        return simple[kind]
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if kind == "array":
        return st.lists(_values(schema["items"], named), max_size=4)
    if kind == "map":
        return st.dictionaries(st.text(max_size=6), _values(schema["values"], named), max_size=4)
    return st.fixed_dictionaries({f["name"]: _values(f["type"], named) for f in schema["fields"]})


# --- how a registry subject's schema evolves: each returns a reader schema for a writer one ---------

_PROMOTE = {"int": ["long", "float", "double"], "long": ["float", "double"], "float": ["double"]}
_PROMOTE |= {"string": ["bytes"], "bytes": ["string"]}


def _evolve(writer: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    reader = json.loads(json.dumps(writer))
    fields: list[dict[str, Any]] = reader["fields"]
    for _ in range(data.draw(st.integers(1, 4))):
        change = data.draw(st.sampled_from(list(_CHANGES)))
        eligible = [f for f in fields if _CHANGES[change](f["type"])]
        if not eligible:
            continue
        field = data.draw(st.sampled_from(eligible))
        if change == "add":
            kind = data.draw(st.sampled_from(["long", "string", "double", "null", "boolean", "array"]))
            default = {"long": -7, "string": "é", "double": 2.5, "null": None, "boolean": True, "array": [1]}[kind]
            schema: Any = {"type": "array", "items": "long"} if kind == "array" else kind
            fields.insert(fields.index(field), {"name": _fresh("added"), "type": schema, "default": default})
        elif change == "remove" and len(fields) > 1:
            fields.remove(field)
        elif change == "promote":
            field["type"] = data.draw(st.sampled_from(_PROMOTE[field["type"]]))
        elif change == "nullable":
            field["type"] = ["null", field["type"]] if data.draw(st.booleans()) else [field["type"], "null"]
        elif change == "enum":
            _evolve_enum(field["type"], data)
        elif change == "reorder":
            fields.append(fields.pop(fields.index(field)))
        elif change == "nested":
            field["type"] = _evolve(field["type"], data)
    return reader


def _defines_nothing(schema: Any) -> bool:
    return '"name"' not in json.dumps(schema)


_CHANGES: dict[str, Any] = {
    "add": lambda _: True,
    "remove": lambda t: _defines_nothing(t),  # a field that moves or goes breaks no reference
    "promote": lambda t: isinstance(t, str) and t in _PROMOTE,
    "nullable": lambda t: not isinstance(t, list),
    "enum": lambda t: isinstance(t, dict) and t["type"] == "enum",
    "reorder": lambda t: _defines_nothing(t),
    "nested": lambda t: isinstance(t, dict) and t["type"] == "record",
}


def _evolve_enum(enum: dict[str, Any], data: st.DataObject) -> None:
    symbols: list[str] = enum["symbols"]
    if data.draw(st.booleans()):
        # Evolved twice, an enum may already hold Z<len>: a symbol of its own, never a duplicate.
        symbols.append(next(f"Z{i}" for i in range(len(symbols), 2 * len(symbols) + 2) if f"Z{i}" not in symbols))
    elif len(symbols) > 1:
        symbols.pop(0)
        if data.draw(st.booleans()) or "default" in enum:
            enum["default"] = symbols[0]


# --- the comparison --------------------------------------------------------------------------------


def _same(ours: Any, theirs: Any) -> bool:
    """Equal values of equal types, NaN equal to NaN, dict keys in the same order."""
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, float):
        return (math.isnan(ours) and math.isnan(theirs)) or (
            ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs)
        )
    if isinstance(ours, dict):
        return list(ours) == list(theirs) and all(_same(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list):
        return len(ours) == len(theirs) and all(_same(a, b) for a, b in zip(ours, theirs, strict=True))
    return bool(ours == theirs)


def _encode(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def _fastavro(body: bytes, writer: Any, reader: Any) -> tuple[str, Any]:
    try:
        return "ok", fastavro.schemaless_reader(io.BytesIO(body), writer, reader)
    except Exception as exc:  # whatever fastavro says is the reference
        return "error", type(exc).__name__


class _Registry:
    """The one call AvroDecoder makes of the registry client, from a dict of schemas."""

    def __init__(self, schemas: dict[int, Any]) -> None:
        self._schemas = schemas

    def get_schema(self, schema_id: int) -> Any:
        return type("Registered", (), {"schema_str": json.dumps(self._schemas[schema_id])})()


def _decoder_answer(writer: dict[str, Any], reader: dict[str, Any] | None, body: bytes) -> tuple[str, Any]:
    decoder = AvroDecoder(_Registry({9: writer}), reader)  # type: ignore[arg-type]
    try:
        return "ok", decoder.decode(b"\x00\x00\x00\x00\x09" + body)
    except SerializationError:
        return "error", None


def _agree(answer: tuple[str, Any], expected: tuple[str, Any]) -> None:
    """The decoder's answer is fastavro's: the same record, or an error (a SerializationError)."""
    assert answer[0] == expected[0], (answer, expected)
    if expected[0] == "ok":
        assert _same(answer[1], expected[1]), (answer[1], expected[1])


def _check(
    writer_schema: dict[str, Any], reader_schema: dict[str, Any] | None, body: bytes, compiled_must_decode: bool
) -> None:
    """The compiled reader returns fastavro's record or raises; the decoder gives fastavro's answer,
    except for a block count past the bytes left, which both refuse and fastavro is never asked
    (with items of no bytes it loops through the count: a worker here reached 18 GB)."""
    writer = fastavro.parse_schema(writer_schema)
    reader = fastavro.parse_schema(reader_schema) if reader_schema is not None else None
    compiled = compile_reader(writer, reader)
    assert compiled is not None, "every generated schema is in the compiled reader's scope"
    try:
        compiled(b"\x00\x00\x00\x00\x09" + body, 5)
    except Refused:
        assert not compiled_must_decode, "a body its writer wrote was refused"
        assert _decoder_answer(writer_schema, reader_schema, body) == ("error", None)
        return
    except Exception:  # judged below, against fastavro
        pass
    expected = _fastavro(body, writer, reader)
    try:
        ours = compiled(b"\x00\x00\x00\x00\x09" + body, 5)
    except Exception:  # Fallback, or a KeyError of a table: fastavro's turn
        assert not (compiled_must_decode and expected[0] == "ok"), "a record fastavro decodes went to fastavro"
    else:
        assert expected[0] == "ok", f"decoded what fastavro refuses: {ours}"
        assert _same(ours, expected[1]), (ours, expected[1])
    _agree(_decoder_answer(writer_schema, reader_schema, body), expected)


_RECORD_SCHEMAS = _records(_schemas())
_EVOLVING_SCHEMAS = _records(_LEAVES | _named("enum") | _schemas(1))
_REPO = sorted(path.stem for path in schemas_dir().glob("*.avsc"))
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(st.data())
def test_generated_schemas_decode_as_fastavro_decodes(data: st.DataObject) -> None:
    schema = data.draw(_RECORD_SCHEMAS)
    record = data.draw(_values(schema))
    _check(schema, None, _encode(fastavro.parse_schema(schema), record), compiled_must_decode=True)


@_SETTINGS
@given(st.data())
def test_evolved_reader_schemas_resolve_as_fastavro_resolves(data: st.DataObject) -> None:
    writer = data.draw(_EVOLVING_SCHEMAS)
    reader = _evolve(writer, data)
    if data.draw(st.booleans()):  # an older writer read by the newer schema, and the other way round
        writer, reader = reader, writer
    record = data.draw(_values(writer))
    _check(writer, reader, _encode(fastavro.parse_schema(writer), record), compiled_must_decode=False)


@cache
def _repository_values(name: str) -> st.SearchStrategy[Any]:
    """Built once per schema: building and validating the strategy cost more than drawing from it."""
    return _values(fastavro.parse_schema(schema_dict(name)))


@pytest.mark.parametrize("name", _REPO)
@_SETTINGS
@given(data=st.data())
def test_every_repository_schema_and_its_evolutions(name: str, data: st.DataObject) -> None:
    schema = schema_dict(name)
    record = data.draw(_repository_values(name))
    body = _encode(fastavro.parse_schema(schema), record)
    _check(schema, None, body, compiled_must_decode=True)
    evolved = _evolve(json.loads(json.dumps(schema)), data)
    older = data.draw(_values(fastavro.parse_schema(evolved)))
    _check(evolved, schema, _encode(fastavro.parse_schema(evolved), older), compiled_must_decode=False)


@_SETTINGS
@given(st.data())
def test_damaged_bodies_get_fastavros_verdict(data: st.DataObject) -> None:
    schema = data.draw(_RECORD_SCHEMAS)
    body = bytearray(_encode(fastavro.parse_schema(schema), data.draw(_values(schema))))
    if body:  # one byte changed: a boolean of 2, an enum or union index out of range, a bad length
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    damaged = bytes(body[:cut]) + data.draw(st.binary(max_size=8))
    _check(schema, None, damaged, compiled_must_decode=False)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "record", "name": "Tree", "fields": [{"name": "kids", "type": {"type": "array", "items": "Tree"}}]},
        {"type": "record", "name": "D", "fields": [{"name": "d", "type": {"type": "int", "logicalType": "date"}}]},
        {"type": "record", "name": "U", "fields": [{"name": "u", "type": {"type": "string", "logicalType": "uuid"}}]},
        {"type": "record", "name": "N", "fields": [{"name": "n", "type": {"type": "array", "items": "null"}}]},
    ],
)
def test_schemas_out_of_scope_are_left_to_fastavro(schema: dict[str, Any]) -> None:
    assert compile_reader(fastavro.parse_schema(schema)) is None
    record = (
        {"kids": [{"kids": []}]}
        if schema["name"] == "Tree"
        else {schema["fields"][0]["name"]: _SAMPLES[schema["name"]]}
    )
    body = _encode(fastavro.parse_schema(schema), record)
    _agree(_decoder_answer(schema, None, body), _fastavro(body, fastavro.parse_schema(schema), None))


_SAMPLES: dict[str, Any] = {"D": 19_000, "U": "0f0e7c2e-1e7a-4c36-a5a4-8d1b1d1f9a51", "N": [None, None]}


def test_reader_aliases_are_left_to_fastavro() -> None:
    writer = {"type": "record", "name": "A", "fields": [{"name": "old", "type": "long"}]}
    reader = {"type": "record", "name": "A", "fields": [{"name": "new", "type": "long", "aliases": ["old"]}]}
    assert compile_reader(fastavro.parse_schema(writer), fastavro.parse_schema(reader)) is None
    assert _decoder_answer(writer, reader, b"\x04") == ("ok", {"new": 2})


def test_enum_index_past_the_table_and_wide_unions_go_to_fastavro() -> None:
    symbols = [f"S{i}" for i in range(70)]
    schema = {
        "type": "record",
        "name": "W",
        "fields": [{"name": "e", "type": {"type": "enum", "name": "Big", "symbols": symbols}}],
    }
    body = _encode(fastavro.parse_schema(schema), {"e": "S65"})
    compiled = compile_reader(fastavro.parse_schema(schema))
    assert compiled is not None
    with pytest.raises(KeyError):
        compiled(b"\x00\x00\x00\x00\x09" + body, 5)
    assert _decoder_answer(schema, None, body) == ("ok", {"e": "S65"})


_TIMES = {
    "type": "record",
    "name": "T",
    "fields": [{"name": "t", "type": _TIMESTAMP_MILLIS}, {"name": "a", "type": {"type": "array", "items": "long"}}],
}


@pytest.mark.parametrize(
    ("body", "compiled_decodes"),
    [
        (b"\x00\x03\x02\x04\x06\x00", True),  # a block of -2 items: its byte size (1) follows the count
        (b"\x00" + b"\xff" * 10 + b"\x01\x00", False),  # an 11-byte varint: past 64 bits
        (b"\x00\x02" + b"\x80" * 9 + b"\x02\x00", False),  # a 10-byte varint whose last byte overflows 64 bits
    ],
)
def test_hand_made_bodies_fastavros_writer_never_makes(body: bytes, compiled_decodes: bool) -> None:
    _check(_TIMES, None, body, compiled_must_decode=compiled_decodes)


def test_a_negative_timestamp_does_not_teach_the_block_cache_a_wrong_block() -> None:
    # -2**35 and 2**35 - 1 zig-zag to 2**36 - 1 and 2**36 - 2: the same last four varint bytes
    for millis in (-(2**35), 2**35 - 1, -(2**35), 2**35 - 1):
        body = _encode(fastavro.parse_schema(_TIMES), {"t": millis, "a": []})
        _check(_TIMES, None, body, compiled_must_decode=True)


def test_a_damaged_count_of_items_without_bytes_is_refused_not_looped_through() -> None:
    """A block count of 2**40 empty records in a body of a few bytes: refused, by the compiled
    reader and by the decoder, never handed to fastavro, which loops through the count (a
    hypothesis run hung on one; handed over, a worker reached 18 GB and the kernel killed it)."""
    schema = {
        "type": "record",
        "name": "Holder",
        "fields": [{"name": "xs", "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}}}],
    }
    compiled = compile_reader(fastavro.parse_schema(schema))
    assert compiled is not None
    body = b"\x00\x00\x00\x00\x09" + spec_long(2**40) + b"\x00"
    with pytest.raises(Refused, match=r"a block of 1099511627776 items, past the 1 bytes left"):
        compiled(body, 5)
    decoder = AvroDecoder(_Registry({9: schema}), None)  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match=r"refused \(schema id 9\): a block of 1099511627776 items"):
        decoder.decode(body)  # its first record: the compiled reader's as well
    assert compiled(b"\x00\x00\x00\x00\x09" + b"\x06\x00", 5) == {"xs": [{}, {}, {}]}  # a real count still reads
