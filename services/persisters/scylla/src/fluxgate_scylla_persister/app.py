"""Entry point: ``fluxgate-scylla-persister`` (or ``python -m fluxgate_scylla_persister``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration (a setting,
or a KCQL statement the table cannot take), 1 when the error policy stopped the persister
or Scylla/Kafka failed it for good (Scylla never answered at start, a table missing ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fluxgate_core.errors import SettingRefused
from fluxgate_core.serde import registry_client
from fluxgate_core.settings import RegistrySettings
from fluxgate_scylla_persister.settings import SERVICE, ScyllaSettings
from fluxgate_scylla_persister.sink import ScyllaSink, WriterFields
from fluxgate_sink.cli import persister_main

# One line per node (dis)connection, schema agreement and protocol downgrade.
QUIET_LOGGERS = ("cassandra", "cassandra.cluster", "cassandra.connection", "cassandra.pool")


def make_sink(settings: ScyllaSettings) -> ScyllaSink:
    try:
        return ScyllaSink(
            settings.scylla, writer_fields=writer_fields(settings.registry), header_format=settings.sink.header_format
        )
    except SettingRefused as exc:  # a CA file that cannot be read: said before anything connects
        raise exc.named(str(ScyllaSettings.model_config.get("env_prefix", ""))) from exc


def writer_fields(registry: RegistrySettings) -> WriterFields:
    """A record's writer schema fields, from the registry: the type of a column AUTOCREATE adds."""
    client = registry_client(registry)  # caches each id's schema

    def fields(schema_id: int) -> Mapping[str, Any]:
        schema = json.loads(client.get_schema(schema_id).schema_str or "{}")
        return {field["name"]: field["type"] for field in schema.get("fields", [])}

    return fields


main = persister_main(
    SERVICE,
    ScyllaSettings,
    make_sink,
    description="Persist temperatures.aggregated into a Scylla/Cassandra table (configured by FLUXGATE_SCYLLA_*).",
    quiet_loggers=QUIET_LOGGERS,
)
