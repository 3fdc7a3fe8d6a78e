"""The vocabulary of a persister's consumer-driven contract with the aggregator.

Each persister declares, in its own ``consumed.py``, the ``TemperatureAggregate`` fields it
relies on. The words are ``fluxgate_core.contract``'s, shared with the consumers of
``sensors.readings``; what is the persisters' own is the schema they are checked against.
"""

from __future__ import annotations

from typing import Any

from fluxgate_core import contract
from fluxgate_core.contract import TIMESTAMP_MILLIS, AvroType, ConsumedFields, is_nullable, kind
from fluxgate_core.schemas import TEMPERATURE_AGGREGATE

__all__ = ["TIMESTAMP_MILLIS", "AvroType", "ConsumedFields", "is_nullable", "kind", "schema_mismatches"]


def schema_mismatches(consumed: ConsumedFields, schema: str = TEMPERATURE_AGGREGATE) -> dict[str, Any]:
    """Declared fields ``schemas/temperature_aggregate.avsc`` does not declare so (see core)."""
    return contract.schema_mismatches(consumed, schema)
