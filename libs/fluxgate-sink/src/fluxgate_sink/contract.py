"""The vocabulary of a persister's consumer-driven contract with the aggregator.

Each persister declares, in its own ``consumed.py``, the ``TemperatureAggregate`` fields it
relies on (name -> Avro type, as ``schemas/temperature_aggregate.avsc`` spells it). The
pact it writes (``fluxgate_sink.testing.pact``) and the aggregator's verification of it
are built from that declaration, so the declaration is the one place to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict

AvroType = str | list[str] | dict[str, str]
ConsumedFields = Mapping[str, AvroType]
"""Field name -> its Avro type in the schema, in schema order."""

TIMESTAMP_MILLIS: Final[dict[str, str]] = {"type": "long", "logicalType": "timestamp-millis"}


def kind(avro_type: AvroType) -> str:
    """``long``, ``timestamp-millis``, ``string`` ...: the logical type, or the non-null branch."""
    if isinstance(avro_type, dict):
        return avro_type.get("logicalType", avro_type["type"])
    if isinstance(avro_type, list):
        (branch,) = [branch for branch in avro_type if branch != "null"]
        return branch
    return avro_type


def is_nullable(avro_type: AvroType) -> bool:
    return isinstance(avro_type, list) and "null" in avro_type


def schema_mismatches(consumed: ConsumedFields, schema: str = TEMPERATURE_AGGREGATE) -> dict[str, Any]:
    """Declared fields the schema does not declare with that type: name -> the schema's type,
    or ``"<absent>"``. Empty when the declaration agrees with ``schemas/<schema>.avsc``."""
    declared = {field["name"]: field["type"] for field in schema_dict(schema)["fields"]}
    return {name: declared.get(name, "<absent>") for name, avro in consumed.items() if declared.get(name) != avro}
