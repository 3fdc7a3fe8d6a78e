"""How an item's id is made from its record: Fluxgate's (the default), or Stream-Reactor's Elastic
sink's, for a persister run from a connector config (``fluxgate connect``).

Fluxgate's id is the PK's values joined with ``|`` (datetimes as epoch millis); without a PK, our
TemperatureAggregate's ``device_id|metric|<event time>``, else the Kafka coordinates
``topic/partition/offset`` (:func:`fluxgate_id`). An aggregate written again for its window (the
aggregator's micro-batch replayed after a crash) so replaces its document, at whatever offset.

Stream-Reactor's (:func:`stream_reactor_ids`) is what its Elastic sinks write, read in
lensesio/stream-reactor: ``ElasticJsonWriter.scala`` (kafka-connect-elastic6/7, elastic-common's
``writers/``) and ``writer/JsonBulkWriter.scala`` (elastic-common, 8 and OpenSearch) join the PK
values with ``settings.pkJoinerSeparator`` (``pks.mkString(...)``), and without a PK an INSERT gets
``autoGenId``: ``Seq(topic, kafkaPartition, kafkaOffset).mkString(pkJoinerSeparator)``; an UPSERT
without a PK is refused (``require(pks.nonEmpty, ...)``). The separator is
``connect.elastic.pk.separator``, default ``-`` (``ElasticConfigDef.scala``,
``ElasticCommonConfigConstants.scala``; ``ElasticConfigConstants.scala`` of elastic5/6/7 alike).

Both keep :func:`~fluxgate_sink.kcql.safe_id`: Elasticsearch refuses an ``_id`` over 512 bytes
(Stream-Reactor then fails the write), so a longer one is hashed instead, the same way each time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any, Literal

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_sink.errors import FieldMissing
from fluxgate_sink.kcql import FieldPath, Statement, lookup, safe_id

__all__ = ["STREAM_REACTOR_SEPARATOR", "IdStyle", "MakeId", "fluxgate_id", "id_maker", "stream_reactor_ids"]

IdStyle = Literal["fluxgate", "stream-reactor"]
#: What makes an item's id: the record (its coordinates), its statement, and what the PK is
#: looked up in (the value, with the decoded key as ``_key`` where the PK names it).
MakeId = Callable[[ConsumedRecord, Statement, Mapping[str, Any]], str]
#: ``connect.elastic.pk.separator``'s default (PK_JOINER_SEPARATOR_DEFAULT in ElasticConfigDef.scala).
STREAM_REACTOR_SEPARATOR = "-"

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def fluxgate_id(record: ConsumedRecord, statement: Statement, value: Mapping[str, Any]) -> str:
    """The PK's values; without a PK and without the default key fields (a ringbuffer of plain
    readings), the record's Kafka coordinates, which are as stable across a replay."""
    try:
        return statement.document_id(value)
    except FieldMissing:
        if statement.pk:
            raise
        return record.source


def stream_reactor_ids(separator: str = STREAM_REACTOR_SEPARATOR) -> MakeId:
    """Stream-Reactor's Elastic sink's ids, its values joined with ``separator`` (see the module)."""

    # safe_id here too, as in Fluxgate's: Elasticsearch refuses an _id over 512 bytes, and Stream-Reactor
    # then fails the write (its pk.separator doc); hashed, the id is as stable across a replay.
    def make(record: ConsumedRecord, statement: Statement, value: Mapping[str, Any]) -> str:
        if not statement.pk:  # ElasticJsonWriter.autoGenId: INSERT only (an UPSERT needs a PK)
            return safe_id(f"{record.topic}{separator}{record.partition}{separator}{record.offset}")
        return safe_id(separator.join(_java_text(lookup(value, path), path) for path in statement.pk))

    return make


def id_maker(style: IdStyle, separator: str = STREAM_REACTOR_SEPARATOR) -> MakeId:
    """The ids of ``style``; ``separator`` is Stream-Reactor's only (Fluxgate's always join with ``|``)."""
    return fluxgate_id if style == "fluxgate" else stream_reactor_ids(separator)


def _java_text(value: Any, path: FieldPath) -> str:
    """A PK value as ``mkString`` writes it: Java's ``toString`` of what PrimaryKeyExtractor.scala
    (elastic-common's ``transform/``) extracts, a JSON node's value or a Struct field's.

    Two refusals where Stream-Reactor writes an id that cannot identify the record: a null (a
    schemaless JSON value's null becomes the text ``null``, so every such record overwrites one
    document; a Struct's null is refused there too) and bytes (``byte[].toString()`` is
    ``[B@<hash>``, another id on every write). Either record is dead-lettered with the reason."""
    where = ".".join(path)
    if value is None:
        raise FieldMissing(f"key field {where} is null")
    if isinstance(value, bool):  # before int: a bool is one in Python
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str | int | Decimal):  # BigDecimal.toString is Decimal's to-scientific-string
        return str(value)
    if isinstance(value, datetime | date | time):
        return _java_date(value)
    if isinstance(value, Mapping | list | tuple):  # "doesn't resolve to a primitive field" / "an array structure"
        raise FieldMissing(
            f"key field {where} is a {'record' if isinstance(value, Mapping) else 'list'}, not one value"
        )
    raise FieldMissing(f"key field {where} is {type(value).__name__}: Stream-Reactor's id of it changes on every write")


def _java_double(value: float) -> str:
    """``Double.toString``: plain from 10^-3 to 10^7, else ``d.dddE<n>``; the shortest digits that
    read back as the same double (JDK 19+, as Python's repr)."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python writes this range plainly too, always with a '.'
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def _java_date(value: datetime | date | time) -> str:
    """``java.util.Date.toString`` (``EEE MMM dd HH:mm:ss zzz yyyy``), what a Struct's Timestamp,
    Date or Time field extracts to. Java writes it in the Connect worker's time zone: UTC here,
    as a worker in a container runs unless told otherwise."""
    if isinstance(value, time):
        value = datetime.combine(date(1970, 1, 1), value)  # Time.toLogical: millis since midnight
    elif not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)  # Date.toLogical: midnight UTC
    at = value.astimezone(UTC) if value.tzinfo else value
    return (
        f"{_DAYS[at.weekday()]} {_MONTHS[at.month - 1]} {at.day:02d} "
        f"{at.hour:02d}:{at.minute:02d}:{at.second:02d} UTC {at.year}"
    )
