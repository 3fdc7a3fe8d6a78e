"""The producer side of a consumer-driven contract: a producer's real record, verified against a committed pact.

A producer's contract test runs its real converter and ``AvroEncoder``, decodes the value from
its Confluent wire-format bytes with the real ``AvroDecoder`` and the **writer's** schema (Avro
resolution to a reader schema would fill a dropped field with its default and hide the break),
and hands the record, as JSON, to pact-python's ``Verifier``, which applies the pact's matching
rules. Nothing compares dicts by hand.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from confluent_kafka.schema_registry import Schema
from pact import Verifier
from pact.types import Message

from fluxgate_core.serde import AvroDecoder
from fluxgate_testing.pact import pacts_dir

SCHEMA_ID = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class OneSchemaRegistry:
    """Stands in for the schema registry: the producer's schema under ``SCHEMA_ID``."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = Schema(json.dumps(schema), "AVRO")

    def get_schema(self, schema_id: int) -> Schema:
        if schema_id != SCHEMA_ID:
            raise KeyError(f"schema id {schema_id} was never registered")
        return self._schema


def as_json(record: dict[str, Any]) -> dict[str, Any]:
    """A decoded record as the pacts state it: timestamps as epoch ms, bytes as base64."""
    return {key: _json_value(value) for key, value in record.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return (value - _EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def message_of(schema: dict[str, Any], value: bytes) -> bytes:
    """A wire-format value written with ``schema`` (under ``SCHEMA_ID``), as the JSON the verifier matches."""
    return json.dumps(as_json(AvroDecoder(OneSchemaRegistry(schema)).decode(value))).encode()  # type: ignore[arg-type]


def verify(provider: str, message: bytes, consumer: str) -> None:
    """Run the Pact verifier for ``consumer``'s pact with ``provider``; AssertionError listing the mismatches."""

    # One kind of message goes on the topic, so every interaction gets the produced one.
    def handler(name: str) -> Message:
        return Message(contents=message, content_type="application/json", metadata=None)

    pact_file = pacts_dir() / f"{consumer}-{provider}.json"
    verifier = Verifier(provider).message_handler(handler).add_source(pact_file).set_coloured_output(enabled=False)
    try:
        verifier.verify()
    except RuntimeError:
        raise AssertionError(failure_report(provider, consumer, pact_file.name, verifier)) from None


def failure_report(provider: str, consumer: str, pact_name: str, verifier: Verifier) -> str:
    """The mismatches first, one a line with where they are; then the verifier's own report."""
    lines = [f"{provider} breaks the {consumer} contract ({pact_name}):"]
    for error in verifier.results.get("errors", []):
        mismatch = error.get("mismatch", {})
        for found in mismatch.get("mismatches") or [mismatch]:
            lines.append(f"  {found.get('path') or found.get('key', '?')} -> {found.get('mismatch', found)}")
    return "\n".join([*lines, "", verifier.output(strip_ansi=True)])
