"""Settings of the Hazelcast persister: ``FLUXGATE_HZ_*``, nested groups with ``__``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from fluxgate_core.settings import (
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)
from fluxgate_core.store_access import HazelcastAccess
from fluxgate_hazelcast_persister.structures import Semantics, check_statements, check_value_format
from fluxgate_sink.errors import KcqlError
from fluxgate_sink.kcql import parse
from fluxgate_sink.settings import SinkSettings

if TYPE_CHECKING:
    from fluxgate_sink.ids import MakeId

SERVICE = "hazelcast-persister"
HEALTH_PORT = 9106
DEFAULT_KCQL = (
    "INSERT INTO temperature_aggregates SELECT * FROM temperatures.aggregated STOREAS RING_BUFFER WITHFORMAT JSON"
)


class HzSinkSettings(SinkSettings):
    """The shared sink options, with this persister's default statement."""

    kcql: str = Field(
        DEFAULT_KCQL,
        min_length=1,
        description="KCQL statements (';'-separated): which topic goes to which ringbuffer, queue, map or topic",
    )
    # fluxgate stays the default (README, Stream-Reactor semantics): our aggregates go to a ringbuffer
    # readers page through, and a TTL in seconds; stream-reactor is what fluxgate connect sets.
    semantics: Semantics = Field(
        "fluxgate",
        description="how a statement reads: fluxgate (no STOREAS: a ringbuffer; MAP: an IMap; TTL in seconds; "
        "map keys: the PK values joined by '|') or stream-reactor (as its Hazelcast sink, set by fluxgate "
        "connect: no STOREAS, MAP or any other unknown name: a reliable topic; TTL in milliseconds, IMap only; "
        "map keys: the PK values joined by '-', without a PK topic-partition-offset; JSON values as "
        "java.lang.String, not HazelcastJsonValue)",
    )

    @field_validator("kcql")
    @classmethod
    def _fits_hazelcast(cls, text: str) -> str:
        # What both semantics refuse, here where pydantic names the field (FLUXGATE_HZ_SINK__KCQL);
        # stream-reactor's reading is the more lenient one, ours is checked with the semantics below.
        try:
            check_statements(parse(text), "stream-reactor")
        except KcqlError as exc:
            raise ValueError(str(exc)) from exc
        return text

    @model_validator(mode="after")
    def _fits_semantics(self) -> HzSinkSettings:
        try:
            statements = parse(self.kcql)
            check_statements(statements, self.semantics)
            check_value_format(statements, self.value_format, self.semantics)
        except KcqlError as exc:
            raise ValueError(f"kcql: {exc}") from exc
        if self.value_format == "string":
            # The consumed text is what is stored (values.text_json, as Stream-Reactor's Writer.scala
            # stores a STRING value): a transform of the decoded value would be dropped without a word.
            changing = [
                f"transforms.{t.name} ({t.type.rsplit('.', 1)[-1]})" for t in self.transforms if _of_value(t.type)
            ]
            if changing:
                raise ValueError(
                    f"{', '.join(changing)}: string values (StringConverter text) are stored as they were "
                    "consumed, one JSON string, so a transform of the value cannot apply; transforms of the key "
                    "and Filter run. Remove it, or read the values as JSON (sink.value_format=json, "
                    "sink.value_schemas_enable=false) to store the transformed document"
                )
        return self

    def document_ids(self) -> MakeId:
        """An IMap's keys: ours, or Stream-Reactor's (its docs: the PK values; Writer.scala's buildPKs
        without a PK: topic-partition-offset, which fluxgate_sink.ids.stream_reactor_ids makes)."""
        from fluxgate_sink.ids import id_maker

        return id_maker(self.semantics)


def _of_value(transform: str) -> bool:
    """Whether a transform class changes the record's value (Kafka's ``$Value`` classes); ValueToKey
    and Filter read it only."""
    return transform.endswith("$Value")


class ConnectionSettings(HazelcastAccess):
    """How to reach the Hazelcast cluster: members, cluster name, credentials, TLS, timeouts."""

    members: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:5701"], min_length=1, description="JSON list of member host:port"
    )
    cluster_name: str = Field("fluxgate", min_length=1, description="the cluster name of the local stack and compose")
    connect_timeout_s: float = Field(
        30.0, gt=0, description="how long the first connection (and a reconnection) may take before giving up"
    )
    invocation_timeout_s: float = Field(
        10.0, gt=0, description="seconds before an operation counts as failed (the store is then unavailable)"
    )
    queue_offer_timeout_ms: int = Field(
        1000, ge=0, description="QUEUE: how long one offer waits for room in a full queue before backing off"
    )
    offsets_map_prefix: str = Field(
        "fluxgate.offsets.", min_length=1, description="IMap <prefix><group> records the last offset written"
    )

    @model_validator(mode="after")
    def _timeouts_fit(self) -> ConnectionSettings:
        if self.queue_offer_timeout_ms / 1000 >= self.invocation_timeout_s:
            raise ValueError("queue_offer_timeout_ms must be shorter than invocation_timeout_s")
        return self

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of ``hazelcast.asyncio.HazelcastClient``."""
        options: dict[str, Any] = {
            "cluster_members": self.members,
            "cluster_name": self.cluster_name,
            "cluster_connect_timeout": self.connect_timeout_s,
            "invocation_timeout": self.invocation_timeout_s,
            # A write lost with its connection is not sent again by the client: the runner
            # decides, knowing what the offset record says was written.
            "redo_operation": False,
        }
        options.update(self.access_options())
        return options


class HazelcastSettings(BaseSettings):
    """The persister's settings; nested groups with ``__`` (``FLUXGATE_HZ_HAZELCAST__MEMBERS``)."""

    model_config = service_config("FLUXGATE_HZ_")

    kafka: KafkaSettings = group(KafkaSettings)
    registry: RegistrySettings = group(RegistrySettings)
    http: HttpSettings = group(HttpSettings, port=HEALTH_PORT)
    log: LogSettings = group(LogSettings)
    sink: HzSinkSettings = Field(default_factory=HzSinkSettings)
    hazelcast: ConnectionSettings = Field(default_factory=ConnectionSettings)

    def group_id(self) -> str:
        """The consumer group, which also names the offset-record map."""
        return self.sink.group_id or f"fluxgate-{SERVICE}"
