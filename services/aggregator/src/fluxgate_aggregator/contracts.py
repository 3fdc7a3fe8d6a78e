"""Schemas from the registry: the writers of the input subject and our output's id."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.schema_registry import SchemaRegistryClient

from fluxgate_aggregator.wire import compact
from fluxgate_core.errors import RegistryError
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_text
from fluxgate_core.serde import register, value_subject


@dataclass(frozen=True)
class Contracts:
    reader: str
    writers: dict[int, str]
    output: str
    output_id: int


def load_contracts(client: SchemaRegistryClient, input_topic: str, output_topic: str, compatibility: str) -> Contracts:
    """Every schema registered under the input subject (so old records still decode) and
    the output schema registered under the output subject, before any record is read."""
    reader = compact(schema_text(SENSOR_READING))
    subject = value_subject(input_topic)
    # Registering the schema we read with is idempotent and makes a fresh stack usable
    # before any gateway has produced; a changed gateway schema just adds a version.
    register(client, subject, reader, compatibility)
    try:
        versions = [client.get_version(subject, v) for v in client.get_versions(subject)]
        writers = {
            version.schema_id: str(version.schema.schema_str) for version in versions if version.schema_id is not None
        }
    except Exception as exc:
        raise RegistryError(f"cannot list schemas of {subject}: {exc}") from exc
    output = compact(schema_text(TEMPERATURE_AGGREGATE))
    output_id = register(client, value_subject(output_topic), output, compatibility)
    return Contracts(reader, writers, output, output_id)
