"""Schemas from the registry: the writers of the input subject and our output's id."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from confluent_kafka.schema_registry import SchemaRegistryClient

from fluxgate_aggregator.wire import compact
from fluxgate_aggregator.writers import Listing
from fluxgate_core.errors import RegistryError
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_text
from fluxgate_core.serde import register, value_subject


@dataclass(frozen=True)
class Contracts:
    reader: str
    writers: dict[int, str]
    output: str
    output_id: int
    # Lists the input subject's writer schemas as the registry has them at the time of the
    # call; None: ``writers`` is all there is (tests, benchmarks).
    listing: Listing | None = None


def load_contracts(client: SchemaRegistryClient, input_topic: str, output_topic: str, compatibility: str) -> Contracts:
    """Every schema registered under the input subject (so old records still decode) and
    the output schema registered under the output subject, before any record is read."""
    subject = value_subject(input_topic)
    # Registering the schema we read with makes a fresh stack usable before any gateway
    # has produced. The text must be byte for byte the gateways' own: the registry keeps
    # a differently formatted copy as a new version with a new id.
    register(client, subject, schema_text(SENSOR_READING), compatibility)
    output_id = register(client, value_subject(output_topic), schema_text(TEMPERATURE_AGGREGATE), compatibility)
    return Contracts(
        compact(schema_text(SENSOR_READING)),
        writer_schemas(client, subject),
        compact(schema_text(TEMPERATURE_AGGREGATE)),
        output_id,
        partial(writer_schemas, client, subject),
    )


def writer_schemas(client: SchemaRegistryClient, subject: str) -> dict[int, str]:
    """Schema id -> schema text of every version registered under ``subject``."""
    try:
        versions = [client.get_version(subject, v) for v in client.get_versions(subject)]
    except Exception as exc:
        raise RegistryError(f"cannot list schemas of {subject}: {exc}") from exc
    return {version.schema_id: str(version.schema.schema_str) for version in versions if version.schema_id is not None}
