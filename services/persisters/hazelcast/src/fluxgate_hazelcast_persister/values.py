"""The value each item becomes in Hazelcast.

* ``WITHFORMAT JSON`` (the default): the projected document as a ``HazelcastJsonValue``,
  datetimes as ISO-8601 strings in UTC (``2026-11-23T12:00:00+00:00``). Hazelcast keeps it
  as JSON, so an IMap of them can be queried with predicates and SQL on its fields.
* ``WITHFORMAT AVRO``: the consumed record's bytes, unchanged: Confluent wire format,
  magic byte 0 and the registry's schema id of ``<topic>-value``, so a reader decodes
  them with the same registry (and the writer's schema, however the topic's schema
  evolved). Only with ``SELECT *``: re-encoding a projection would need a schema of its
  own per target; ``structures.check_statements`` refuses that at start.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from hazelcast.core import HazelcastJsonValue

from fluxgate_sink.errors import FieldMissing
from fluxgate_sink.sink import SinkItem

Value = HazelcastJsonValue | bytes


def value_of(item: SinkItem) -> Value:
    """What ``item`` is stored as, by its statement's format."""
    if item.statement.format == "AVRO":
        return item.source.value
    return HazelcastJsonValue(to_json(item.document))


def to_json(document: dict[str, Any]) -> str:
    """Compact JSON; datetimes as ISO-8601 in UTC, decimals as strings, bytes as hex.

    NaN and infinities (valid Avro doubles) have no JSON form: such a document is refused
    for good (:class:`FieldMissing`, not retriable), so the error policy decides."""
    try:
        return json.dumps(document, default=_plain, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError) as exc:
        raise FieldMissing(f"the document has no JSON form: {exc}") from exc


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
