"""Record values as Kafka Connect's JsonConverter writes them with ``schemas.enable=true``: a
``{schema, payload}`` envelope, its schema built from plain field entries (the decoder's unit
tests and ``fluxgate connect``'s JSON topics write the same shape)."""

from __future__ import annotations

import json
from typing import Any

TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"  # int64 epoch milliseconds


def field(label: str, kind: str, /, optional: bool = False, **more: Any) -> dict[str, Any]:
    """One field of a struct schema; ``more`` adds its other keys (``name``, ``default``, ``items``)."""
    return {"field": label, "type": kind, "optional": optional, **more}


def struct(name: str, *fields: dict[str, Any]) -> dict[str, Any]:
    """A required struct schema named ``name``, of ``fields`` in order."""
    return {"type": "struct", "name": name, "optional": False, "fields": list(fields)}


def envelope(payload: Any, schema: Any) -> bytes:
    """The value JsonConverter writes: the schema (or null) beside the payload."""
    return json.dumps({"schema": schema, "payload": payload}).encode()
