"""Everything the persister reads from its environment (prefix ``FLUXGATE_ES_``).

Nested groups with ``__``: ``FLUXGATE_ES_ELASTICSEARCH__HOSTS='["https://es:9200"]'``,
``FLUXGATE_ES_SINK__KCQL=...``, ``FLUXGATE_ES_RETENTION__DAYS=30``.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings

from fluxgate_core.settings import (
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)
from fluxgate_core.store_access import ElasticsearchAccess
from fluxgate_sink.ids import STREAM_REACTOR_SEPARATOR, IdStyle, MakeId, id_maker
from fluxgate_sink.kcql import parse
from fluxgate_sink.settings import SinkSettings

SERVICE = "es-persister"
HEALTH_PORT = 9104
# (device_id, metric, window_start) identifies a window: a replayed aggregate overwrites its own document.
DEFAULT_KCQL = (
    "INSERT INTO temperatures SELECT * FROM temperatures.aggregated"
    " PK device_id, metric, window_start WITHINDEXSUFFIX=-{YYYY.MM.dd}"
)


class EsSinkSettings(SinkSettings):
    """The shared sink options, with this persister's default statement and its choice of ids."""

    kcql: str = Field(
        DEFAULT_KCQL,
        min_length=1,
        description="KCQL statements (';'-separated): which topic goes to which index, id, suffix",
    )
    # fluxgate stays the default (README, Document ids): an aggregate written again for its window
    # (the aggregator's micro-batch replayed after a crash) replaces its document; an id from the
    # offset would add a second one. stream-reactor is what fluxgate connect sets for its configs.
    document_id: IdStyle = Field(
        "fluxgate",
        description="how a document's _id is made: fluxgate (the PK values joined by '|'; without a PK, "
        "device_id|metric|<event time>, else topic/partition/offset) or stream-reactor (as its Elastic sink, "
        "set by fluxgate connect: the PK values joined by pk_separator; without a PK, topic, partition and "
        "offset joined by it); an id over 512 bytes is hashed (sha256:<hex>) in both",
    )
    pk_separator: str = Field(
        STREAM_REACTOR_SEPARATOR,
        description="document_id=stream-reactor: what joins the parts of an id "
        "(Stream-Reactor's connect.elastic.pk.separator, default '-')",
    )

    @model_validator(mode="after")
    def _ids_consistent(self) -> Self:
        if self.document_id == "fluxgate" and "pk_separator" in self.model_fields_set:
            raise ValueError("pk_separator applies to document_id=stream-reactor only: fluxgate ids join with '|'")
        if self.document_id == "stream-reactor":
            # JsonBulkWriter.scala / ElasticJsonWriter.scala: require(pks.nonEmpty, ...) for an UPSERT.
            unkeyed = [s.text for s in parse(self.kcql) if s.mode == "UPSERT" and not s.pk]
            if unkeyed:
                raise ValueError(
                    f"document_id=stream-reactor: an UPSERT needs a PK, as in Stream-Reactor: {unkeyed[0]}"
                )
        return self

    def document_ids(self) -> MakeId:
        return id_maker(self.document_id, self.pk_separator)


class ConnectionSettings(ElasticsearchAccess):
    """How to reach Elasticsearch: hosts, TLS, and either an API key or basic auth."""

    hosts: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:9200"], min_length=1, description="JSON list of node URLs"
    )
    request_timeout: float = Field(30.0, gt=0, description="seconds before a request counts as failed")
    bulk_max_actions: int = Field(1000, ge=1, le=100_000, description="documents per bulk request")
    number_of_shards: int = Field(1, ge=1, le=1024, description="primary shards of each daily index")
    number_of_replicas: int = Field(0, ge=0, le=16, description="replicas of each daily index (0 on one node)")

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of ``AsyncElasticsearch``."""
        options: dict[str, Any] = {
            "hosts": self.hosts,
            "request_timeout": self.request_timeout,
            "verify_certs": self.verify_certs,
            # Retrying is the runner's job (it pauses and writes the same batch again).
            "max_retries": 0,
            "retry_on_timeout": False,
        }
        if self.ca_certs:
            options["ca_certs"] = self.ca_certs
        if not self.verify_certs:
            options["ssl_show_warn"] = False
        if self.api_key is not None:
            options["api_key"] = self.api_key.get_secret_value()
        elif (basic := self.basic_auth()) is not None:
            options["basic_auth"] = basic
        return options


class RetentionSettings(Group):
    """Dated indices older than ``days`` (by the date in their name, UTC) are deleted or closed."""

    enabled: bool = Field(True, description="false never deletes or closes anything")
    days: int = Field(7, ge=1, le=36_500, description="keep indices dated within this many days")
    action: Literal["delete", "close"] = Field("delete", description="what happens to an expired index")
    interval_s: float = Field(3600.0, gt=0, description="how often to look for expired indices")


class ElasticsearchSettings(BaseSettings):
    """The persister's settings; nested groups with ``__`` (``FLUXGATE_ES_ELASTICSEARCH__HOSTS``)."""

    model_config = service_config("FLUXGATE_ES_")

    kafka: KafkaSettings = group(KafkaSettings)
    registry: RegistrySettings = group(RegistrySettings)
    http: HttpSettings = group(HttpSettings, port=HEALTH_PORT)
    log: LogSettings = group(LogSettings)
    sink: EsSinkSettings = Field(default_factory=EsSinkSettings)
    elasticsearch: ConnectionSettings = Field(default_factory=ConnectionSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
