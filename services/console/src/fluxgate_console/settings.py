"""Settings of the console: ``FLUXGATE_CONSOLE_*``, nested groups with ``__``.

The services it watches are a list (``FLUXGATE_CONSOLE_SERVICES``, JSON): a name, the base
URL of each instance, its role and the topics and consumer group that place it in the flow.
The defaults are the local stack's (`make run`): every service on its default port.
Each store's TLS and credentials (``ELASTICSEARCH__*``, ``SCYLLA__*``, ``HAZELCAST__*``) are
its persister's own settings, same names and meanings (``fluxgate_core.store_access``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, FilePath, SecretStr, StringConstraints, model_validator
from pydantic_settings import BaseSettings

from fluxgate_console.hazelcast_store import checked_kcql
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import (
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)
from fluxgate_core.store_access import ElasticsearchAccess, HazelcastAccess, ScyllaAccess

SERVICE = "console"
ENV_PREFIX = "FLUXGATE_CONSOLE_"
Role = Literal["gateway", "processor", "persister"]


class WatchedService(Group):
    """One service of the pipeline as the console sees it."""

    name: str = Field(min_length=1, description="the service's name (a connector in the Connect API)")
    urls: list[str] = Field(min_length=1, description="base URL of each instance (its /readyz, /metrics)")
    role: Role = Field(description="gateway (devices in), processor (topic to topic), persister (topic to store)")
    group: str | None = Field(None, description="its consumer group, for lag")
    inputs: list[str] = Field(default_factory=list, description="topics it reads")
    outputs: list[str] = Field(default_factory=list, description="topics it writes")
    store: str | None = Field(None, description="the store it writes (persisters)")
    late: str | None = Field(
        None, description="its late-readings topic (the aggregator's): a share of its input far above normal is shown"
    )


def _local(name: str, port: int, role: Role, **placed: object) -> WatchedService:
    return WatchedService.model_validate({"name": name, "urls": [f"http://127.0.0.1:{port}"], "role": role, **placed})


def local_services() -> list[WatchedService]:
    """The services of `make run` on their default ports, topics and groups."""
    dead, readings, aggregated = "sensors.deadletter", "sensors.readings", "temperatures.aggregated"
    persisted = {"inputs": [aggregated], "outputs": ["persisters.deadletter"]}
    return [
        _local("mqtt-proxy", 9101, "gateway", outputs=[readings, dead]),
        _local("coap-ingest", 9102, "gateway", outputs=[readings, dead]),
        _local("aggregator", 9103, "processor", group="fluxgate-aggregator", inputs=[readings],
               outputs=[aggregated, "temperatures.late", dead], late="temperatures.late"),
        _local("device-status", 9107, "processor", group="fluxgate-device-status", inputs=[readings],
               outputs=["devices.status"]),
        _local("es-persister", 9104, "persister", group="fluxgate-es-persister", store="elasticsearch", **persisted),
        _local("scylla-persister", 9105, "persister", group="fluxgate-scylla-persister", store="scylla", **persisted),
        _local("hazelcast-persister", 9106, "persister", group="fluxgate-hazelcast-persister", store="hazelcast",
               **persisted),
    ]  # fmt: skip


class AuthSettings(Group):
    """Who may use a part of the console: HTTP basic, a bearer token, or nobody asked (``none``,
    for local use only: it must be chosen explicitly)."""

    mode: Literal["basic", "bearer", "none"] = Field("basic", description="basic, bearer or none (local use only)")
    username: str | None = Field(None, description="basic: the user name")
    password: SecretStr | None = Field(None, description="basic: the password")
    token: SecretStr | None = Field(None, description="bearer: the token")

    def problem(self) -> str | None:
        """What is missing for ``mode``, naming the field; None when usable."""
        if self.mode == "basic" and not (self.username and self.password):
            return "username and password are needed for basic auth (or mode=none, for local use only)"
        if self.mode == "bearer" and not self.token:
            return "token is needed for bearer auth (or mode=none, for local use only)"
        return None


class WebSettings(Group):
    """Where and how the page, its JSON, replay and the Kafka Connect API are served."""

    host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="the page's address; 127.0.0.1 (this machine only) unless said otherwise (the image and "
        "the chart say 0.0.0.0)",
    )
    port: int = Field(9108, ge=0, le=65535, description="the page's port; 0 picks a free port")
    tls_certfile: FilePath | None = Field(None, description="PEM certificate (chain): the page is served over HTTPS")
    tls_keyfile: FilePath | None = Field(None, description="PEM private key of tls_certfile")
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "localhost", "[::1]"],
        min_length=1,
        description='JSON list of host names (no port) the page answers to, the names people reach it by; "*": any',
    )
    trusted_origins: list[Annotated[str, StringConstraints(pattern=r"^https?://[^/\s]+$")]] = Field(
        default_factory=list,
        description="JSON list of origins (scheme://host[:port]) besides the page's own that may post (replay), "
        "for a proxy that rewrites Host",
    )

    @model_validator(mode="after")
    def _paired(self) -> WebSettings:
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise ValueError("tls_certfile and tls_keyfile go together")
        return self


def _kept(what: str) -> Any:  # Any: what Field() returns, so each field keeps its declared type
    description = f'{what} with counts of their own per topic; the rest are counted together as "(other)"'
    return Field(8, ge=1, le=50, description=description)


class DeadLetterSettings(Group):
    """Which dead letters are read, and how much of them is kept in memory."""

    topics: list[str] = Field(
        default_factory=lambda: ["sensors.deadletter", "persisters.deadletter"], description="JSON list"
    )
    recent: int = Field(500, ge=1, description="newest dead letters kept per topic (shown, filtered, replayed)")
    lookback: int = Field(10_000, ge=1, description="records per partition read at start (older are not counted)")
    preview_bytes: int = Field(256, ge=16, le=65536, description="bytes of each original payload previewed")
    # At most 180: the page draws each minute as a bar at least 1 px wide in a 180 px column.
    timeline_minutes: int = Field(
        60, ge=5, le=180, description="minutes counted per reason and per service (one bar each on the page)"
    )
    kept_reasons: int = _kept("reasons")
    kept_services: int = _kept("services")


TopicName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,249}$")]


def pipeline_replay_targets() -> dict[str, list[str]]:
    """Where the pipeline's own dead letters legitimately come from: the aggregator's (on
    sensors.deadletter) from sensors.readings, the persisters' sink runtime's from
    temperatures.aggregated. The gateways' come from MQTT or CoAP: no Kafka topic."""
    return {"sensors.deadletter": ["sensors.readings"], "persisters.deadletter": ["temperatures.aggregated"]}


class ReplaySettings(Group):
    """Replay: where the audit goes, how much one replay may send, and the only topics it may
    write to."""

    audit_topic: str = Field("console.replays", min_length=1, description="ReplayAudit records, one per replay")
    transactional_id: str = Field(
        "fluxgate-console-replay", min_length=1, description="replays and their audit commit in one transaction"
    )
    max_records: int = Field(1000, ge=1, description="dead letters one replay may send")
    targets: dict[TopicName, list[TopicName]] = Field(
        default_factory=pipeline_replay_targets,
        description="JSON map: dead-letter topic -> the only topics its letters may be replayed to (a letter "
        "naming another, e.g. by a forged header, is shown as not replayable)",
    )


class ElasticsearchStoreSettings(ElasticsearchAccess):
    """Elasticsearch, asked directly: the es-persister's daily indices behind their alias."""

    hosts: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:9200"],
        description="JSON list of node URLs, asked in order until one answers; empty = not shown",
    )
    alias: str = Field("temperatures", min_length=1, description="the alias over the daily indices")


class ScyllaStoreSettings(ScyllaAccess):
    """Scylla or Cassandra, asked directly: the scylla-persister's table (its default KCQL's)."""

    contact_points: list[str] = Field(
        default_factory=lambda: ["127.0.0.1"], description="JSON list of node addresses; empty = not shown"
    )
    port: int = Field(9042, ge=1, le=65535, description="native protocol (CQL) port")
    local_datacenter: str | None = Field(None, description="the datacenter to ask; default: the first contact point's")
    table: str = Field(
        "fluxgate.temperature_aggregates",
        pattern=r"^[A-Za-z0-9_]{1,48}\.[A-Za-z0-9_]{1,48}$",
        description="keyspace.table the scylla-persister writes",
    )
    days: int = Field(2, ge=1, le=31, description="rows are counted for the last N UTC days (today and yesterday)")
    max_partition_keys: int = Field(
        1000, ge=1, le=1_000_000, description="partition keys read per ask to learn the series (bounded scan)"
    )
    # Each ask is 2 statements per series and day (a count and the newest row): 5,000 series
    # over 2 days asked at every 5 s refresh is 20,000 statements each time, against the 2,250
    # rows a 100,000-device fleet at 450 readings/s writes in those 5 s.
    refresh_s: float = Field(
        60.0,
        gt=0,
        description="how often Scylla is asked (an answer is shown with its age; an error is asked again "
        "at the page's next refresh)",
    )


class HazelcastStoreSettings(HazelcastAccess):
    """Hazelcast, asked directly: the structures the hazelcast-persister's KCQL writes."""

    members: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:5701"], description="JSON list of member host:port; empty = not shown"
    )
    cluster_name: str = Field("fluxgate", min_length=1, description="the cluster name the members expect")
    kcql: Annotated[str, AfterValidator(checked_kcql)] = Field(
        "INSERT INTO temperature_aggregates SELECT * FROM temperatures.aggregated STOREAS RING_BUFFER WITHFORMAT JSON",
        min_length=1,
        description="the hazelcast-persister's KCQL: each target and STOREAS is a structure shown",
    )


class AttentionSettings(Group):
    """When a processor's event time needs an operator's look, though every service is ready."""

    clock_ahead_s: float = Field(
        60.0, gt=0, description="a watermark this far ahead of the wall clock (a device's clock runs ahead) is shown"
    )
    late_share: float = Field(
        0.1, gt=0, le=1, description="late readings above this share of the input, over the rate window, are shown"
    )


class ConsoleSettings(BaseSettings):
    """console settings; nested groups with ``__`` (``FLUXGATE_CONSOLE_PAGE_AUTH__MODE``)."""

    model_config = service_config(ENV_PREFIX)

    kafka: KafkaSettings = group(KafkaSettings)
    registry: RegistrySettings = group(RegistrySettings)
    http: HttpSettings = group(HttpSettings, port=9109)
    web: WebSettings = group(WebSettings)
    log: LogSettings = group(LogSettings)
    services: list[WatchedService] = Field(default_factory=local_services, description="the services watched (JSON)")
    page_auth: AuthSettings = group(AuthSettings)
    replay_auth: AuthSettings = group(AuthSettings)
    deadletters: DeadLetterSettings = group(DeadLetterSettings)
    replay: ReplaySettings = group(ReplaySettings)
    refresh_s: float = Field(5.0, gt=0, description="how often services, Kafka and stores are asked")
    request_timeout_s: float = Field(2.0, gt=0, description="a service or Kafka slower than this counts as down")
    rate_window_s: float = Field(60.0, gt=0, description="records/s are averaged over this long")
    attention: AttentionSettings = group(AttentionSettings)
    elasticsearch: ElasticsearchStoreSettings = group(ElasticsearchStoreSettings)
    scylla: ScyllaStoreSettings = group(ScyllaStoreSettings)
    hazelcast: HazelcastStoreSettings = group(HazelcastStoreSettings)

    def checked(self) -> ConsoleSettings:
        """Raise :class:`ConfigError` naming the variable when an auth group cannot be used."""
        for name in ("page_auth", "replay_auth"):
            problem = getattr(self, name).problem()
            if problem:
                raise ConfigError(f"invalid configuration:\n  {name} [env {ENV_PREFIX}{name.upper()}__*]: {problem}")
        self._check_replay_targets()
        names = [service.name for service in self.services]
        if len(set(names)) != len(names):
            raise ConfigError(f"invalid configuration:\n  services [env {ENV_PREFIX}SERVICES]: names repeat: {names}")
        return self

    def _check_replay_targets(self) -> None:
        """A replay target must be read from (a dead-letter topic read) and must not be a dead
        letter or audit topic: a replay would feed the console's own input."""
        dead = set(self.deadletters.topics)
        targets = {topic for allowed in self.replay.targets.values() for topic in allowed}
        unread = sorted(set(self.replay.targets) - dead)
        looping = sorted(targets & (dead | {self.replay.audit_topic}))
        problem = None
        if unread:
            problem = f"{unread} are not dead-letter topics read (deadletters.topics: {sorted(dead)})"
        elif looping:
            problem = f"{looping} cannot be replay targets: dead-letter or audit topics"
        if problem:
            raise ConfigError(f"invalid configuration:\n  replay.targets [env {ENV_PREFIX}REPLAY__TARGETS]: {problem}")
