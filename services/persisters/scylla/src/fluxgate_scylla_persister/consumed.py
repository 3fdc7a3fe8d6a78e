"""The fields of ``TemperatureAggregate`` the Scylla persister relies on, and their CQL types.

``device_id``, ``metric`` and ``window_start`` make the primary key (with the ``day`` the
window starts on); every field is a column of the table AUTOCREATE makes, typed from
this declaration (``CQL_TYPES``). The consumer-driven contract (``tests/contract``) is
written from it and the aggregator verifies it against bytes its real Spark encoding
produces, so renaming or dropping one of these fields fails the aggregator's build.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from fluxgate_sink.contract import TIMESTAMP_MILLIS, AvroType, ConsumedFields, kind

CONSUMED_FIELDS: Final[ConsumedFields] = MappingProxyType(
    {
        "device_id": "string",
        "metric": "string",
        "window_start": TIMESTAMP_MILLIS,
        "window_end": TIMESTAMP_MILLIS,
        "count": "long",
        "min": "double",
        "max": "double",
        "mean": "double",
        "stddev": "double",
        "first_event_time": TIMESTAMP_MILLIS,
        "last_event_time": TIMESTAMP_MILLIS,
        "unit": ["null", "string"],
    }
)
"""Field name -> its Avro type in ``schemas/temperature_aggregate.avsc``, in schema order."""

_CQL: Final[Mapping[str, str]] = {
    "string": "text",
    "long": "bigint",
    "int": "int",
    "double": "double",
    "float": "float",
    "boolean": "boolean",
    "bytes": "blob",
    "timestamp-millis": "timestamp",
}


CQL_TYPES: Final[Mapping[str, str]] = MappingProxyType({n: _CQL[kind(t)] for n, t in CONSUMED_FIELDS.items()})
"""Field name -> the CQL type of its column in the table AUTOCREATE makes."""


def cql_type(avro_type: AvroType) -> str | None:
    """The CQL type AUTOCREATE gives a field of ``avro_type`` (``["null", "string"]`` -> ``text``);
    None when it has none: a record, an array, a map, an enum, a union of two non-null types."""
    if isinstance(avro_type, list):
        branches = [branch for branch in avro_type if branch != "null"]
        return cql_type(branches[0]) if len(branches) == 1 else None
    found = avro_type.get("logicalType", avro_type.get("type")) if isinstance(avro_type, dict) else avro_type
    return _CQL.get(found) if isinstance(found, str) else None
