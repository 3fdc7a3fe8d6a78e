"""KCQL, the statements Stream-Reactor users already write, for sinks and sources alike::

    INSERT INTO temperatures SELECT * FROM temperatures.aggregated WITHINDEXSUFFIX -{YYYY.MM.DD};
    INSERT INTO `$` SELECT * FROM /devices/+/telemetry WITHKEY(sensorId)

One grammar (``kcql.lark``: LALR, keywords case-insensitive, the clauses after FROM in any
order, each at most once) and one place that turns its faults into messages a user can act
on: :class:`KcqlError` names the line and column, with the line and a caret. What a clause
*means* is the connector's business: a :class:`Dialect` says which clauses it takes, and a
clause it does not take fails here, at its position, with the reason.

:func:`parse_statements` gives the generic :class:`ParsedStatement` (fluxgate-sink builds its
sink statements from it); :func:`parse_sources` the gateways' :class:`SourceStatement`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.tree import Meta

from fluxgate_core.errors import ConfigError
from fluxgate_core.payloads import PayloadFormat

FieldPath = tuple[str, ...]
SINK_CLAUSES = ("IGNORE", "PK", "AUTOCREATE", "BATCH", "WITHINDEXSUFFIX", "STOREAS", "WITHFORMAT", "TTL", "PROPERTIES")
SOURCE_CLAUSES = ("WITHKEY", "KEYDELIMITER", "WITHCONVERTER")
CLAUSES = SINK_CLAUSES + SOURCE_CLAUSES
DYNAMIC_TARGET = "$"  # a source's target: the Kafka topic derived from where each message came from
DEFAULT_KEY_DELIMITER = "."  # Stream-Reactor's, between WITHKEY values
# What "expected ..." says for terminals that are neither keywords nor punctuation; None: another one says it.
_NAMED: dict[str, str | None] = {"ENTITY": "a topic or target name", "NAME": "a field name", "NUMBER": "a number"}
_NAMED |= {"SUFFIX": "an index suffix such as -{YYYY.MM.dd}", "PROP_WORD": "a property key or value"}
_NAMED |= {"$END": "the end of the input", "QUOTED_NAME": None, "STRING": None, "_WITH": None}
_PARSER = Lark.open(
    "kcql.lark", rel_to=__file__, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=True
)
_TERMINAL_ORDER = [terminal.name for terminal in _PARSER.terminals]
# Stream-Reactor's source converters, under the packages they have had (before and after 6.0).
CONVERTER_PACKAGES = (
    "com.datamountaineer.streamreactor.connect.converters.source",
    "io.lenses.streamreactor.connect.converters.source",
    "com.datamountaineer.streamreactor.connect.mqtt.source.converters",  # the MQTT connector's own, before 1.0
)
# Those whose payload is ours to parse: JSON. (Their Kafka records were Connect structs, ours are
# SensorReading; a payload that is not JSON goes to the dead-letter topic, never through.)
CONVERTER_FORMATS: dict[str, PayloadFormat] = dict.fromkeys(
    ("JsonSimpleConverter", "JsonConverterWithSchemaEvolution", "JsonOptNullConverter", "JsonResilientConverter"),
    "json",
)
CONVERTERS_REFUSED = {
    "BytesConverter": "it forwards the payload as opaque bytes, and Fluxgate writes each reading the payload "
    "holds as a SensorReading: leave WITHCONVERTER out to parse JSON, SenML or CBOR",
    "JsonPassThroughConverter": "it forwards the JSON text unparsed, and Fluxgate writes each reading the JSON "
    "holds as a SensorReading: use JsonSimpleConverter (or no WITHCONVERTER) to parse it",
    "AvroConverter": "its payloads are Avro binary under schemas from connect.converter.avro.schemas, and "
    "Fluxgate's payload formats are JSON, SenML and CBOR",
}
# Why a clause is refused where it makes no sense (the message names the clause and the connector).
_SINK_ONLY = "it says how a store is written, and a source writes Kafka records"
_NOT_FOR_SOURCE = dict.fromkeys(SINK_CLAUSES, _SINK_ONLY) | {
    "PK": "a source's Kafka key comes from WITHKEY",
    "WITHFORMAT": "a source's payload format comes from WITHCONVERTER",
}
_NOT_FOR_SINK = {
    "WITHKEY": "a sink keys what it writes by PK",
    "KEYDELIMITER": "it goes with WITHKEY, and a sink keys what it writes by PK",
    "WITHCONVERTER": "converters read device payloads, and a sink reads Avro records from Kafka",
}


class KcqlError(ConfigError):
    """A KCQL statement that does not parse or makes no sense; says where and what was expected."""


@dataclass(frozen=True)
class FieldRef:
    """One SELECT entry: ``a.b AS x`` is ``FieldRef(("a", "b"), "x")``, ``a.*`` is
    ``FieldRef(("a",), wildcard=True)``, ``*`` is ``FieldRef((), wildcard=True)``."""

    path: FieldPath
    alias: str | None = None
    wildcard: bool = False


EVERYTHING = (FieldRef((), wildcard=True),)


@dataclass(frozen=True)
class Dialect:
    """What one kind of connector accepts: its name (for messages), clauses, and shape."""

    name: str
    clauses: tuple[str, ...]
    refused: dict[str, str]  # clause -> why this connector refuses it
    source: bool = False  # INSERT ... SELECT * only: a source takes the whole payload
    many_sources: bool = False  # FROM a, b


SINK = Dialect("a sink", SINK_CLAUSES, _NOT_FOR_SINK)
MQTT_SOURCE = Dialect("the MQTT source", SOURCE_CLAUSES, _NOT_FOR_SOURCE, source=True)
COAP_SOURCE = Dialect(
    "the CoAP source",
    (),
    _NOT_FOR_SOURCE | dict.fromkeys(SOURCE_CLAUSES, "the CoAP source's records are keyed and parsed by coap-ingest"),
    source=True,
    many_sources=True,
)


@dataclass(frozen=True)
class ParsedStatement:
    """One statement as written, its clauses still lark trees (keyword -> node) for the connector to read."""

    text: str
    mode: Literal["INSERT", "UPSERT"]
    target: str
    sources: tuple[str, ...]
    fields: tuple[FieldRef, ...]
    clauses: dict[str, Tree[Token]]
    meta: Meta


@dataclass(frozen=True)
class SourceStatement:
    """A gateway's statement: where messages come from, which Kafka topic they go to, keyed how."""

    text: str
    target: str  # a Kafka topic, or DYNAMIC_TARGET
    sources: tuple[str, ...]  # MQTT filters or CoAP resource paths
    key_fields: tuple[FieldPath, ...] = ()
    key_delimiter: str = DEFAULT_KEY_DELIMITER
    converter: str | None = None
    payload_format: PayloadFormat = "auto"  # what WITHCONVERTER means here; auto without one

    @property
    def dynamic(self) -> bool:
        return self.target == DYNAMIC_TARGET


def parse_statements(text: str, dialect: Dialect) -> list[ParsedStatement]:
    """The statements in ``text``, separated by ``;``; raises KcqlError on any fault."""
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from exc
    statements = [_statement(text, node, dialect) for node in tree.children if isinstance(node, Tree)]
    if not statements:
        raise KcqlError("KCQL is empty: expected a statement such as INSERT INTO <target> SELECT * FROM <topic>")
    return statements


def parse_sources(text: str, dialect: Dialect) -> list[SourceStatement]:
    """A source connector's statements (``INSERT INTO <topic or $> SELECT * FROM <source>``)."""
    return [_source(text, parsed) for parsed in parse_statements(text, dialect)]


def _source(text: str, parsed: ParsedStatement) -> SourceStatement:
    clauses = parsed.clauses
    if "KEYDELIMITER" in clauses and "WITHKEY" not in clauses:
        raise located(text, clauses["KEYDELIMITER"].meta, "KEYDELIMITER without WITHKEY: there is no key to delimit")
    keys = tuple(field_path(kid) for kid in clauses["WITHKEY"].children) if "WITHKEY" in clauses else ()
    delimiter = leaf(clauses["KEYDELIMITER"].children[0])[1:-1] if "KEYDELIMITER" in clauses else None
    converter = leaf(clauses["WITHCONVERTER"].children[0]) if "WITHCONVERTER" in clauses else None
    return SourceStatement(
        parsed.text, parsed.target, parsed.sources, keys, DEFAULT_KEY_DELIMITER if delimiter is None else delimiter,
        unquote(converter) if converter else None, _converter_format(text, converter) if converter else "auto",
    )  # fmt: skip


def _converter_format(text: str, token: Token) -> PayloadFormat:
    """The payload format a Stream-Reactor converter class means, or a KcqlError saying why none."""
    name = unquote(token)
    package, _, simple = name.rpartition(".")
    if package not in CONVERTER_PACKAGES:
        known = ", ".join(sorted(CONVERTER_FORMATS))
        why = f"unknown converter '{name}'; expected one of Stream-Reactor's ({known}) under {CONVERTER_PACKAGES[1]}"
        raise located(text, token, why)
    if simple in CONVERTER_FORMATS:
        return CONVERTER_FORMATS[simple]
    why = CONVERTERS_REFUSED.get(simple, "it is not one of Stream-Reactor's source converters")
    raise located(text, token, f"converter {simple} is not supported: {why}")


# ---- from the lark tree to a ParsedStatement, with the checks every connector shares ----


def _statement(text: str, node: Tree[Token], dialect: Dialect) -> ParsedStatement:
    mode, target, select, sources, *clause_nodes = (child for child in node.children if isinstance(child, Tree))
    fields = _fields(text, select)
    clauses: dict[str, Tree[Token]] = {}
    for clause in clause_nodes:
        keyword = clause.data.upper()  # the grammar names each clause's rule after its keyword
        if keyword in clauses:
            raise located(text, clause.meta, f"{keyword} given twice; each clause may appear once")
        if keyword not in dialect.clauses:
            why = dialect.refused.get(keyword, "it does not take it")
            raise located(text, clause.meta, f"{keyword} makes no sense for {dialect.name}: {why}")
        clauses[keyword] = clause
    entities = [child for child in sources.children if isinstance(child, Tree)]
    if len(entities) > 1 and not dialect.many_sources:
        raise located(
            text, entities[1].meta, f"{dialect.name} reads one source per statement; write one statement each"
        )
    parsed = ParsedStatement(
        text=text[node.meta.start_pos : node.meta.end_pos].strip(),
        mode="INSERT" if leaf(mode).upper() == "INSERT" else "UPSERT",
        target=unquote(leaf(target)),
        sources=tuple(unquote(leaf(entity)) for entity in entities),
        fields=fields,
        clauses=clauses,
        meta=node.meta,
    )
    if dialect.source:
        _check_source_shape(text, parsed, mode, select, dialect)
    return parsed


def _check_source_shape(
    text: str, parsed: ParsedStatement, mode: Tree[Token], select: Tree[Token], dialect: Dialect
) -> None:
    if parsed.mode != "INSERT":
        raise located(text, mode.meta, f"{dialect.name} only appends to Kafka: INSERT, not {parsed.mode}")
    if parsed.fields != EVERYTHING:
        raise located(text, select.meta, f"{dialect.name} takes the whole payload: SELECT *, not a field list")


def _fields(text: str, select: Tree[Token]) -> tuple[FieldRef, ...]:
    fields: tuple[FieldRef, ...] = ()
    for field in (child for child in select.children if isinstance(child, Tree)):
        fields += (_field_ref(field),)
        names = [f.alias or f.path[-1] for f in fields if not f.wildcard]
        if len(set(names)) < len(names):
            raise located(text, field.meta, f"a second field named '{names[-1]}'; give it an alias")
    return fields


def _field_ref(node: Tree[Token]) -> FieldRef:
    if node.data == "all":
        return FieldRef((), wildcard=True)
    path = field_path(node.children[0])
    if node.data == "nested_all":
        return FieldRef(path, wildcard=True)
    alias = node.children[1]
    return FieldRef(path, unquote(leaf(alias)) if isinstance(alias, Tree) else None)


def field_path(node: Tree[Token] | Token | None) -> FieldPath:
    """``a.b`` (a ``path`` node) as ``("a", "b")``."""
    assert isinstance(node, Tree)
    return tuple(unquote(token) for token in node.scan_values(lambda v: isinstance(v, Token)))


def leaf(node: Tree[Token] | Token | None) -> Token:
    """The (first) token of ``node``, with its line and column."""
    assert node is not None
    return node if isinstance(node, Token) else next(node.scan_values(lambda v: isinstance(v, Token)))


def unquote(name: str) -> str:
    """A name without its backticks or single quotes."""
    return str(name[1:-1] if name[:1] in ("`", "'") and len(name) > 1 else name)


# ---- errors a user can act on ----


def _syntax_error(text: str, exc: UnexpectedInput) -> KcqlError:
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedToken):
        expected, found = set(exc.accepts or exc.expected), f"'{exc.token}'"
        if exc.token.type == "$END":
            stripped = text.rstrip()
            line, column = stripped.count("\n") + 1, len(stripped) - stripped.rfind("\n")
            found = "the end of the input"
    elif isinstance(exc, UnexpectedCharacters):
        expected, found = set(exc.allowed), f"'{text[exc.pos_in_stream or 0]}'"
    else:
        expected, found = set(getattr(exc, "expected", ())), "something else"
    return located(text, (line, column), f"expected {_describe(expected)}, found {found}")


def _describe(expected: set[str]) -> str:
    words = []
    if (clauses := {f"_{keyword}" for keyword in CLAUSES}) <= expected:
        words.append(f"a clause ({', '.join(CLAUSES)})")
        expected -= clauses
    for name in sorted(expected, key=lambda n: _TERMINAL_ORDER.index(n) if n in _TERMINAL_ORDER else 99):
        if name in _NAMED:
            readable = _NAMED[name]
        else:  # a keyword says its name; punctuation shows itself
            pattern = _PARSER.get_terminal(name).pattern
            readable = repr(pattern.value) if pattern.type == "str" else name.lstrip("_")
        if readable is not None:
            words.append(readable)
    return " or ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} or {words[-1]}"


def located(text: str, where: Token | Meta | tuple[int, int], message: str) -> KcqlError:
    """A :class:`KcqlError` at ``where`` (a token, a node's meta, or line and column): the line, a caret."""
    line, column = where if isinstance(where, tuple) else (where.line or 1, where.column or 1)
    lines = text.splitlines() or [""]
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    pad = "".join("\t" if char == "\t" else " " for char in source[: column - 1]).ljust(column - 1)
    return KcqlError(f"KCQL line {line}, column {column}: {message}\n    {source}\n    {pad}^")
