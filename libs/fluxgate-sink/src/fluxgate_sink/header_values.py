"""A record header's value as Kafka Connect's header converters give it to a sink: the default,
``SimpleHeaderConverter`` (:func:`header_value`), and the fixed-width number and boolean converters
(:func:`fixed_width`); :func:`fluxgate_sink.formats.header_reader` picks one by ``sink.header_format``.

``SimpleHeaderConverter.toConnectHeader`` (apache/kafka 4.4, ``connect/api/src/main/java/org/apache/
kafka/connect/storage/SimpleHeaderConverter.java``) reads the bytes as UTF-8 text and infers a typed
value from it with ``Values.parseString`` (``connect/api/.../data/Values.java``, its nested
``ValueParser`` and ``Parser`` since Kafka 3.8). This module follows that parser rule by rule, checked
against the connect-api 4.4.0 jar, so a Stream-Reactor user's sink writes what Kafka Connect would
have handed it:

* ``true``/``false`` (lowercase, surrounding blanks ignored) are booleans, ``null`` is None.
* A number (Java ``BigDecimal`` syntax: ``+5``, ``1.0``, ``1e3``; ``NaN``, ``Infinity``, ``0x10``
  and ``1_000`` are text) that is whole and fits a long is an int (``1.0`` is 1, ``1e3`` 1000);
  any other is the nearest float32 (``0.1`` is 0.10000000149011612), the nearest double if that
  overflows, a Decimal if both do; digits alone beyond a long are a Decimal, ``1e19`` a float32.
* ``yyyy-MM-dd``, ``HH:mm:ss.SSS'Z'`` and ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` (picked by the text's
  length, read leniently as Java's ``SimpleDateFormat`` does: ``2024-13-01`` is 2025-01-01) are a
  date, a time and a datetime in UTC (as on a Connect worker whose JVM zone is UTC).
* ``[...]`` and ``{...}`` are lists and dicts of such values (strings in double quotes), their
  numbers widened to a common type (``[1, 2.5]`` is ``[1.0, 2.5]``); one that does not parse, or
  whose elements cannot take the common type (``[1, null]``), is the text.
* Anything else is the whole text unchanged. Only the first value counts: ``1,2`` is 1.

A value Kafka Connect gives that Python has no value for (a time of day of 24:00 or later, a date
before year 1, a map keyed by lists, two map keys Java keeps apart that are one in Python) raises
:class:`Unrepresentable`. Where Kafka Connect gives the raw bytes (its parser failing with a stack
overflow on deeply nested brackets), so does :func:`header_value` (Python's recursion limit, well
below Java's, decides how deep here).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from fluxgate_sink import lenient_dates
from fluxgate_sink.connect_numbers import Kind, big_decimal, float32_of_double, number, widened
from fluxgate_sink.connect_tokens import Tokens, blank, trim

__all__ = [
    "FIXED_WIDTH",
    "ReadHeader",
    "Unconvertible",
    "Unrepresentable",
    "fixed_width",
    "header_value",
    "parse_string",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_MS = 86_400_000
# Values picks the pattern by the text's length (in UTF-16 units, as Java counts).
_TEMPORAL = {
    10: (Kind.DATE, lenient_dates.DATE),
    13: (Kind.TIME, lenient_dates.TIME),
    24: (Kind.TIMESTAMP, lenient_dates.TIMESTAMP),
}
Typed = tuple[Kind, Any]  # a value and the Connect schema type Values gives it
ReadHeader = Callable[[bytes | None], Any]  # a header's bytes (None: a null header) as the sink's value


class Unrepresentable(ValueError):
    """Kafka Connect gives the header a value that no Python value stands for."""


class Unconvertible(ValueError):
    """The header converter refuses the header's bytes: its ``toConnectHeader`` throws a
    DataException, which Kafka Connect's error handling (errors.tolerance) takes as the record's."""


#: The fixed-width converters of connect-runtime (org.apache.kafka.connect.converters), each a
#: HeaderConverter whose toConnectHeader is its toConnectData: Kafka's own deserializer of the type
#: (LongDeserializer ...), big-endian, exactly its width (checked against the connect-runtime 4.4.0 jar).
#: Name -> (the converter's class name, the width, the struct format).
FIXED_WIDTH = {
    "long": ("LongConverter", 8, ">q"),
    "integer": ("IntegerConverter", 4, ">i"),
    "short": ("ShortConverter", 2, ">h"),
    "float": ("FloatConverter", 4, ">f"),  # a float32, as the double Java widens it to: 0.1f is 0.10000000149011612
    "double": ("DoubleConverter", 8, ">d"),
    "boolean": ("BooleanConverter", 1, ""),
}


class _Refused(Exception):
    """Values' DataException inside a list or a map: the parser falls back to the text."""


def header_value(raw: bytes | None) -> Any:
    """The value ``SimpleHeaderConverter.toConnectHeader`` makes of a header's bytes: None for a null
    header, else :func:`parse_string` of their UTF-8 text (a malformed sequence read as U+FFFD, as
    Java's ``new String(bytes, UTF_8)``); the bytes themselves where its parser throws."""
    if raw is None:
        return None
    try:
        return parse_string(raw.decode("utf-8", "replace"))
    except RecursionError:  # Java's StackOverflowError, which the converter catches as any Throwable
        return raw


def fixed_width(name: str) -> ReadHeader:
    """The reader of :data:`FIXED_WIDTH`'s converter ``name``: None for a null header; Unconvertible
    for any other width ("Size of data received by LongDeserializer is not 8") or, for a boolean, a
    byte other than 0 or 1 (BooleanDeserializer: "Unexpected byte received")."""
    converter, width, layout = FIXED_WIDTH[name]

    def read(raw: bytes | None) -> Any:
        if raw is None:
            return None
        if len(raw) != width:
            raise Unconvertible(f"{converter} reads exactly {width} byte(s), got {len(raw)}")
        if layout:
            return struct.unpack(layout, raw)[0]
        if raw[0] > 1:
            raise Unconvertible(f"{converter} reads 0 (false) or 1 (true), got {raw[0]}")
        return raw[0] == 1

    return read


def parse_string(text: str) -> Any:
    """``Values.parseString(text)``'s value, as Python: see the module."""
    if not text:
        return text
    return _python(_Parser(text).parse(embedded=False))


class _Parser:
    """``Values.ValueParser``: the value of the text, typed as Connect types it."""

    def __init__(self, text: str) -> None:
        self.tokens = Tokens(text)

    def parse(self, embedded: bool) -> Typed | None:
        tokens = self.tokens
        if not tokens.has_next():
            return None
        if embedded and tokens.consume('"'):
            return self._quoted()
        if self._literal(embedded, "null"):
            return None
        for literal, flag in (("true", True), ("false", False)):
            if self._literal(embedded, literal):
                return Kind.BOOLEAN, flag
        start = tokens.mark()
        try:
            if tokens.consume("["):
                return self._array()
            if tokens.consume("{"):
                return self._map()
        except _Refused:  # not a list or a map after all: read again from its bracket, as a token
            tokens.rewind(start)
        token = tokens.next()
        if blank(token):
            return Kind.STRING, token
        return self._token(embedded, trim(token))

    def _literal(self, embedded: bool, literal: str) -> bool:
        # At the top level, a literal must be the whole text: "true}" is text, not true.
        start = self.tokens.mark()
        if self.tokens.consume(literal) and (embedded or not self.tokens.has_next()):
            return True
        self.tokens.rewind(start)
        return False

    def _token(self, embedded: bool, token: str) -> Typed:
        digit = _is_digit(token[0])
        if digit:  # a time's colons split it into five tokens: try those first
            start = self.tokens.mark()
            rest = self.tokens.next_n(4)
            if rest is not None and (temporal := _temporal(token + rest)) is not None:
                return temporal
            self.tokens.rewind(start)
            if (temporal := _temporal(token)) is not None:
                return temporal
        if digit or token[0] in "+-":
            decimal = big_decimal(token)
            if decimal is not None:
                return number(decimal)
        if embedded:
            raise _Refused("not a value inside a list or a map")
        return Kind.STRING, self.tokens.text  # the whole text, not only this token

    def _quoted(self) -> Typed:
        parts: list[str] = []
        while self.tokens.has_next() and not self.tokens.consume('"'):
            parts.append(self.tokens.next())
        content = "".join(parts)
        return _temporal(content) or (Kind.STRING, content)

    def _array(self) -> Typed:
        items: list[Typed | None] = []
        common = _Common()
        while self.tokens.has_next():
            if self.tokens.consume("]"):
                return Kind.ARRAY, items if common.kind is None else [_align(common.kind, i) for i in items]
            if self.tokens.consume(","):
                raise _Refused("an empty element")
            item = self.parse(embedded=True)
            common.merge(item)
            items.append(item)
            at = self.tokens.mark()
            if self.tokens.consume("]"):
                self.tokens.rewind(at)
            elif not self.tokens.consume(","):
                raise _Refused("elements without a comma between them")
        raise _Refused("no closing bracket")

    def _map(self) -> Typed:
        entries: dict[Hashable, tuple[Typed, Typed | None]] = {}
        keys, values = _Common(), _Common()
        while self.tokens.has_next():
            if self.tokens.consume("}"):
                return Kind.MAP, _aligned(entries, keys.kind, values.kind)
            if self.tokens.consume(","):
                raise _Refused("an empty entry")
            key = self.parse(embedded=True)
            if key is None or not self.tokens.consume(":"):
                raise _Refused("an entry without a key or a colon")
            value = self.parse(embedded=True)
            _put(entries, key, value)
            self.tokens.consume(",")  # the comma between entries is optional
            keys.merge(key)
            values.merge(value)
        raise _Refused("no closing brace")


class _Common:
    """Values.SchemaMerger: the one type every non-null element can take, if there is one."""

    def __init__(self) -> None:
        self.kind: Kind | None = None
        self.compatible = True

    def merge(self, item: Typed | None) -> None:
        if item is None or not self.compatible:
            return
        self.kind = item[0] if self.kind is None else widened(self.kind, item[0])
        self.compatible = self.kind is not None


def _align(kind: Kind, item: Typed | None) -> Typed:
    """``item`` converted to the common ``kind`` as Values.convertTo does without a source schema."""
    if item is None:
        raise _Refused("a null element where the common type requires a value")
    have, value = item
    if have.temporal:
        if kind.temporal:  # a java.util.Date passes unchanged into any temporal type
            return item
        raise _Refused("a date, time or timestamp has no number without its schema")
    if kind is Kind.DATE:
        return kind, value * _DAY_MS  # a number of days (Date.toLogical), kept in ms like every temporal
    if kind is Kind.TIME and not 0 <= value <= _DAY_MS:
        raise _Refused("Time.toLogical refuses milliseconds outside a day")
    if kind is Kind.FLOAT32 and have is not Kind.FLOAT32:
        return kind, float32_of_double(float(value))  # Java's (float) of the number's double
    if kind is Kind.FLOAT64:
        return kind, float(value)
    return (kind if kind.numeric else have), value  # a Time or Timestamp takes milliseconds as they are


def _aligned(
    entries: dict[Hashable, tuple[Typed, Typed | None]], keys: Kind | None, values: Kind | None
) -> dict[Hashable, tuple[Typed, Typed | None]]:
    """A map's entries with their keys (and values, if they too have a common type) converted; only
    the keys when the values have none, nothing when the keys have none (Values.parseMap)."""
    if keys is None:
        return entries
    result: dict[Hashable, tuple[Typed, Typed | None]] = {}
    for key, value in entries.values():
        _put(result, _align(keys, key), value if values is None else _align(values, value))
    return result


def _put(entries: dict[Hashable, tuple[Typed, Typed | None]], key: Typed, value: Typed | None) -> None:
    # A LinkedHashMap keeps the first of equal keys, in its place, with the last value.
    identity = _identity(key)
    entries[identity] = (entries[identity][0] if identity in entries else key, value)


def _identity(item: Typed | None) -> Hashable:
    """What Java's equals() compares: the class and the value (a float's bits, a BigDecimal's scale;
    every temporal is one java.util.Date class, equal by its milliseconds)."""
    if item is None:
        return None
    kind, value = item
    if kind.temporal:
        return "date", value
    if kind is Kind.ARRAY:
        return kind, tuple(_identity(element) for element in value)
    if kind is Kind.MAP:
        return kind, frozenset((key, _identity(entry)) for key, (_, entry) in value.items())
    if kind in (Kind.FLOAT32, Kind.FLOAT64):
        return kind, struct.pack(">d", value)
    if kind is Kind.DECIMAL:
        return kind, value.as_tuple()
    return kind, value


def _temporal(token: str) -> Typed | None:
    """A date, time or timestamp in Values' ISO formats, picked by the text's length in UTF-16 units."""
    token = token.replace("\\:", ":")
    found = _TEMPORAL.get(len(token) + sum(ord(char) > 0xFFFF for char in token))
    if found is None:
        return None
    kind, pattern = found
    millis = lenient_dates.lenient_millis(token, pattern)
    return None if millis is None else (kind, millis)


def _python(item: Typed | None) -> Any:
    if item is None:
        return None
    kind, value = item
    if kind is Kind.ARRAY:
        return [_python(element) for element in value]
    if kind is Kind.MAP:
        return _python_dict(value)
    if kind.temporal:
        return _python_temporal(kind, value)
    return value


def _python_dict(entries: dict[Hashable, tuple[Typed, Typed | None]]) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for key, value in entries.values():
        python_key = _python(key)
        try:
            taken = python_key in result
        except TypeError:  # a list or a dict
            raise Unrepresentable("a map keyed by a list or a map, which a Python dict cannot hold") from None
        if taken:  # 1 and true, 0.0 and -0.0: apart in Java, one key in Python
            raise Unrepresentable(f"two map keys Kafka Connect keeps apart are one in Python: {python_key!r}")
        result[python_key] = _python(value)
    return result


def _python_temporal(kind: Kind, millis: int) -> date | time | datetime:
    """A Connect Date (UTC midnight), Time (of 1970-01-01) or Timestamp: date, time, aware datetime."""
    if kind is Kind.TIME:
        if not 0 <= millis < _DAY_MS:
            raise Unrepresentable(f"a time of day of {millis} ms, not within one day: no Python time holds it")
        return (datetime.min + timedelta(milliseconds=millis)).time()
    try:
        stamp = _EPOCH + timedelta(milliseconds=millis)
    except OverflowError:
        raise Unrepresentable(f"an instant {millis} ms from 1970, beyond Python's years 1 to 9999") from None
    return stamp.date() if kind is Kind.DATE else stamp


def _is_digit(char: str) -> bool:
    """Java's Character.isDigit of one UTF-16 unit: a decimal digit of the Basic Multilingual Plane."""
    return char.isdecimal() and ord(char) <= 0xFFFF
