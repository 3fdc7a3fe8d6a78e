"""The vocabulary of a consumer-driven contract on an Avro topic.

A consumer declares, in its own ``consumed.py``, the fields of a record it relies on
(name -> Avro type, spelled as the ``.avsc`` spells it). The pact it writes
(``fluxgate_testing.pact``) and its producers' verification of that pact are built
from the declaration, so the declaration is the one place to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fluxgate_core.schemas import schema_dict

AvroType = str | list[str] | dict[str, Any]
"""An Avro type as the ``.avsc`` spells it: a name, a union, a logical type or an enum."""
ConsumedFields = Mapping[str, AvroType]
"""Field name -> its Avro type in the schema, in schema order."""

TIMESTAMP_MILLIS: Final[dict[str, str]] = {"type": "long", "logicalType": "timestamp-millis"}


def kind(avro_type: AvroType) -> str:
    """``long``, ``timestamp-millis``, ``enum``, ``string`` ...: the logical type, or the non-null branch."""
    if isinstance(avro_type, dict):
        return str(avro_type.get("logicalType", avro_type["type"]))
    if isinstance(avro_type, list):
        (branch,) = [branch for branch in avro_type if branch != "null"]
        return branch
    return avro_type


def is_nullable(avro_type: AvroType) -> bool:
    """Whether a field of this type may be null (a union with ``"null"``)."""
    return isinstance(avro_type, list) and "null" in avro_type


def schema_mismatches(consumed: ConsumedFields, schema: str) -> dict[str, Any]:
    """Declared fields that ``schemas/<schema>.avsc`` does not declare with that type: name ->
    the schema's type, or ``"<absent>"``. Empty when the declaration agrees with the schema."""
    declared = {field["name"]: _without_docs(field["type"]) for field in schema_dict(schema)["fields"]}
    return {name: declared.get(name, "<absent>") for name, avro in consumed.items() if declared.get(name) != avro}


def _without_docs(avro_type: Any) -> Any:
    """A type as it constrains data: a named type's ``doc`` says nothing a consumer relies on."""
    if isinstance(avro_type, dict):
        return {key: _without_docs(value) for key, value in avro_type.items() if key != "doc"}
    if isinstance(avro_type, list):
        return [_without_docs(branch) for branch in avro_type]
    return avro_type
