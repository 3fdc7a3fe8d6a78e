"""Everything the persister reads from its environment (prefix ``FLUXGATE_SCYLLA_``).

Nested groups with ``__``: ``FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS='["10.0.0.1","10.0.0.2"]'``,
``FLUXGATE_SCYLLA_SINK__KCQL=...``, ``FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY=QUORUM``.
"""

from __future__ import annotations

from typing import Any, Literal

import structlog
from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings

from fluxgate_core.settings import (
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)
from fluxgate_core.store_access import ScyllaAccess
from fluxgate_scylla_persister.key_deletes import KeyDelete
from fluxgate_scylla_persister.table import ColumnMatch, DefaultValue
from fluxgate_sink.settings import SinkSettings

log = structlog.get_logger(__name__)

SERVICE = "scylla-persister"
HEALTH_PORT = 9105
# The target is ``keyspace.table``; the table's primary key is ((device_id, metric, day), window_start).
DEFAULT_KCQL = "UPSERT INTO fluxgate.temperature_aggregates SELECT * FROM temperatures.aggregated AUTOCREATE"

Consistency = Literal["ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE"]


class ScyllaSinkSettings(SinkSettings):
    """The shared sink options, with this persister's default statement."""

    kcql: str = Field(
        DEFAULT_KCQL,
        min_length=1,
        description="KCQL statements (';'-separated): which topic goes to which keyspace.table, TTL, AUTOCREATE",
    )


class ConnectionSettings(ScyllaAccess):
    """How to reach Scylla or Cassandra, and how the persister writes and creates tables there."""

    contact_points: list[str] = Field(
        default_factory=lambda: ["127.0.0.1"], min_length=1, description="JSON list of node addresses"
    )
    port: int = Field(9042, ge=1, le=65535, description="native protocol (CQL) port")
    local_datacenter: str | None = Field(
        None, description="the datacenter to write to; default: the one of the first contact point"
    )
    keyspace: str = Field(
        "fluxgate", pattern=r"^[A-Za-z0-9_]{1,48}$", description="keyspace of a KCQL target without one"
    )
    consistency: Consistency = Field("LOCAL_QUORUM", description="consistency level of every write")
    request_timeout_s: float = Field(10.0, gt=0, description="seconds before one statement counts as failed")
    connect_timeout_s: float = Field(10.0, gt=0, description="seconds to open a connection")
    max_in_flight: int = Field(256, ge=1, le=32_768, description="statements in flight at once, over all batches")
    # Sized for the strictest server: at up to ~250 bytes of mutation per TemperatureAggregate row,
    # 20 rows stay under batch_size_warn_threshold (5 KiB by default) and far under the fail
    # threshold (50 KiB). Cassandra 5.0.9 warned about no single-partition batch up to 700 rows.
    partition_batch_rows: int = Field(
        20,
        ge=1,
        le=1000,
        description="rows of one partition (same table, same partition key) written as one UNLOGGED BATCH at "
        "most; 1 writes one statement per row. Keep rows x row size under the server's "
        "batch_size_warn_threshold (5 KiB by default): a batch over batch_size_fail_threshold is refused and "
        "written again row by row",
    )
    reconnect_max_delay_s: float = Field(5.0, gt=0, description="cap of the wait between reconnection attempts")
    replication_strategy: Literal["SimpleStrategy", "NetworkTopologyStrategy"] = Field(
        "NetworkTopologyStrategy", description="AUTOCREATE: replication class of a new keyspace"
    )
    replication_factor: int = Field(1, ge=1, le=16, description="AUTOCREATE: replicas per datacenter")
    # fluxgate stays the default (README, Columns: ours and Stream-Reactor's): our tables' columns are
    # named as our fields are, and an exact match never writes two fields into one column.
    column_match: ColumnMatch = Field(
        "fluxgate",
        description="how a record's fields find their columns: fluxgate (by exact name), stream-reactor "
        "(as its older Cassandra sinks' JSON insert, set by fluxgate connect: a field name is lower-cased unless it "
        'is in double quotes, so DeviceId writes column deviceid and "DeviceId" column "DeviceId"; the KCQL '
        "target's keyspace and table are lower-cased too) or stream-reactor-10 (as its 10.x sink, set by fluxgate "
        'connect: exact names, deviceId writes column "deviceId" only; a SELECT must name each field and every '
        "primary-key column, the target must be keyspace.table; a null field is left unset under UNSET)",
    )
    # UNSET stays the default (README, Columns): a record that lacks a field (an older writer's schema)
    # must not clear what a newer one wrote. fluxgate connect sets Stream-Reactor's NULL unless its
    # config says UNSET (connect.cassandra.default.value, CassandraJsonWriter.scala).
    default_value: DefaultValue = Field(
        "UNSET",
        description="what a column gets when the record has no field for it: UNSET (left as it is; under "
        "UPSERT a null field too) or NULL (null written into it, a null field too, whatever the write mode: "
        "Stream-Reactor's Cassandra sink's connect.cassandra.default.value, NULL its default, set by fluxgate "
        "connect)",
    )

    # Stream-Reactor's older Cassandra sinks delete by key (connect.cassandra.delete.enabled,
    # .statement, .struct_flds; key_deletes.py). Off unless a statement is given.
    delete_statement: str | None = Field(
        None,
        description="a tombstone (a record whose value is null) deletes a row, its cells, a partition or a range "
        "of it: DELETE [<column>, ...] FROM <table> WHERE <column> = ? AND ... (no USING, IF or IN), its markers "
        "bound from the record key (the key itself, or the "
        "fields delete_key_fields names); unset: a tombstone is dead-lettered (Stream-Reactor's "
        "connect.cassandra.delete.statement, set by fluxgate connect when connect.cassandra.delete.enabled is true)",
    )
    delete_key_fields: list[str] = Field(
        default_factory=list,
        description="the record key's fields that fill delete_statement's markers, in order, a dotted name reaching "
        "into a nested field, for a key with fields (Avro or JSON with a schema, or text holding a JSON object); "
        "empty: the key itself fills the one marker (connect.cassandra.delete.struct_flds)",
    )

    @model_validator(mode="after")
    def _delete_parses(self) -> ConnectionSettings:
        if self.delete_statement is not None:
            try:
                KeyDelete.parse(self.delete_statement, self.delete_key_fields)
            except ValueError as exc:
                raise ValueError(f"delete_statement: {exc}") from None
        elif self.delete_key_fields:
            raise ValueError("delete_key_fields: set delete_statement too, the DELETE its fields fill")
        return self

    def key_delete(self) -> KeyDelete | None:
        """The DELETE a tombstone runs, when one is set."""
        return None if self.delete_statement is None else KeyDelete.parse(self.delete_statement, self.delete_key_fields)

    @model_validator(mode="before")
    @classmethod
    def _empty_login_is_none(cls, data: Any) -> Any:
        """An empty username or password means no authentication, as in Stream-Reactor's Cassandra
        sink (CassandraConnection.scala, addAuthMode: credentials only when both are non-empty)."""
        if not isinstance(data, dict) or not ({"username", "password"} & {k for k, v in data.items() if _empty(v)}):
            return data
        if not all(_empty(data.get(key)) for key in ("username", "password")):
            log.warning("scylla.no_authentication", reason="username or password empty: connecting without a login")
        return {key: value for key, value in data.items() if key not in ("username", "password")}


def _empty(value: Any) -> bool:
    """A setting given as the empty string (None, not given, is not empty)."""
    return (value.get_secret_value() if isinstance(value, SecretStr) else value) == ""


class ScyllaSettings(BaseSettings):
    """The persister's settings; nested groups with ``__`` (``FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS``)."""

    model_config = service_config("FLUXGATE_SCYLLA_")

    kafka: KafkaSettings = group(KafkaSettings)
    registry: RegistrySettings = group(RegistrySettings)
    http: HttpSettings = group(HttpSettings, port=HEALTH_PORT)
    log: LogSettings = group(LogSettings)
    sink: ScyllaSinkSettings = Field(default_factory=ScyllaSinkSettings)
    scylla: ConnectionSettings = Field(default_factory=ConnectionSettings)
