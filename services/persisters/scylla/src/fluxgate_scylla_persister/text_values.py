"""Text written into a column of another type, as the connectors a connector config names read it.

A schemaless JSON value, a StringConverter value or a header holds numbers, flags, times and ids as
text as often as not: ``{"at": "2026-11-28T01:00:00Z"}``, ``_header.count`` = ``"42"``. The sinks
whose configs ``fluxgate connect`` runs write such text into a typed column:

* Stream-Reactor's Cassandra sinks before 10.x write each record with Cassandra's
  ``INSERT ... JSON``, whose ``fromJson`` reads a JSON string for a number, a boolean, a timestamp,
  a date, a time or a uuid column (apache/cassandra ``cql3/Json.java`` and each type's
  ``fromJSONObject``: ``"42"`` is an int, ``"true"`` a boolean).
* 10.x hands the record to DataStax's connector, whose codecs convert a string to the column's type
  (datastax/dsbulk ``codecs/text``: ``StringToIntegerCodec``, ``StringToInstantCodec`` ... with
  ISO-8601 times and epoch milliseconds, the connector's defaults).

cassandra-driver binds none of them (``DateType arguments must be a datetime``), so without this a
record that 10.x wrote would be dead-lettered. Our own services' Avro values are typed, and keep
being bound as they are. A text that does not read as the column's type fails its record, naming
the column and the type.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from fluxgate_sink.errors import SinkError

Coerce = Callable[[str], Any]
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BOOLEANS = {"true": True, "false": False}


def _integer(text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise ValueError("not an integer")
    return int(text)


def _float(text: str) -> float:
    if not _NUMBER.fullmatch(text):  # Python's float() also takes "1_0", " 1", "inf" ...
        raise ValueError("not a number")
    return float(text)


def _decimal(text: str) -> Decimal:
    if not _NUMBER.fullmatch(text):
        raise ValueError("not a number")
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise ValueError("not a number") from exc


def _boolean(text: str) -> bool:
    found = _BOOLEANS.get(text.lower())
    if found is None:
        raise ValueError("neither true nor false")
    return found


def _timestamp(text: str) -> datetime | int:
    """Epoch milliseconds, or ISO 8601 (a time without an offset is UTC, as the connector's default
    time zone, and as Cassandra's fromJson reads one with none given in a UTC node)."""
    if _INTEGER.fullmatch(text):
        return int(text)
    stamp = datetime.fromisoformat(text)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


#: A column's CQL type -> how a text becomes a value the driver binds to it. The driver binds text
#: itself to text, ascii, varchar, inet, date and time columns; blob and collections are left as
#: they are (the driver says why a text does not fit them).
_COERCIONS: dict[str, Coerce] = {
    **dict.fromkeys(("int", "bigint", "smallint", "tinyint", "varint", "counter"), _integer),
    "float": _float,
    "double": _float,
    "decimal": _decimal,
    "boolean": _boolean,
    "timestamp": _timestamp,
    "uuid": uuid.UUID,
    "timeuuid": uuid.UUID,
}


def text_coercion(cql_type: str) -> Coerce | None:
    """How a text becomes a value of a column of ``cql_type``; None: a text is bound as it is."""
    return _COERCIONS.get(cql_type)


def coerced(column: str, cql_type: str, coerce: Coerce, text: str) -> Any:
    """``text`` as a value of ``column``; a text that does not read as its type fails the record."""
    try:
        return coerce(text)
    except ValueError as exc:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise SinkError(f"{column}: {shown!r} is not a {cql_type} ({exc})", retriable=False) from exc
