"""Where the stack lives and which ports it uses, all overridable with ``FLUXGATE_STACK_*``.

Defaults match what every service's own settings expect, so a service started with no
environment at all talks to the local stack.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from fluxgate_stack.errors import StackError

DEFAULT_TOPICS = (
    "sensors.readings:3,sensors.deadletter:3,temperatures.aggregated:3,temperatures.late:3,devices.status:3"
)
DEFAULT_PARTITIONS = 3


class StackSettings(BaseSettings):
    """Settings of the local stack tool (env prefix ``FLUXGATE_STACK_``)."""

    # extra="ignore": the prefix is shared with variables meant for other tools (e.g. CI flags).
    model_config = SettingsConfigDict(env_prefix="FLUXGATE_STACK_", frozen=True, extra="ignore")

    home: Path | None = Field(default=None, description="folder that holds .local/; default: the repository root")
    host: str = Field(default="127.0.0.1", description="loopback address every server binds to")
    kafka_port: int = Field(default=9092, ge=1, le=65535, description="Kafka PLAINTEXT listener")
    kafka_controller_port: int = Field(default=9093, ge=1, le=65535, description="KRaft CONTROLLER listener")
    kafka_secure_port: int = Field(
        default=9094, ge=1, le=65535, description="Kafka SASL_SSL listener (SCRAM, TLS from the stack's CA, ACLs)"
    )
    kafka_version: str = Field(default="4.4.0", description="org.apache.kafka:kafka_2.13 version")
    kafka_heap: str = Field(default="768m", description="-Xmx of the broker")
    topics: str = Field(default=DEFAULT_TOPICS, description="name[:partitions],... created by `up`")
    registry_port: int = Field(default=8081, ge=1, le=65535, description="Apicurio Registry HTTP port")
    registry_version: str = Field(default="3.0.9", description="io.apicurio:apicurio-registry-app version")
    registry_secure_port: int = Field(
        default=8444, ge=1, le=65535, description="HTTPS port of the secured registry (TLS and authentication)"
    )
    keycloak_port: int = Field(
        default=8543, ge=1, le=65535, description="HTTPS port of Keycloak, the secured registry's OIDC provider"
    )
    registry_heap: str = Field(default="512m", description="-Xmx of the registry")
    registry_journal_topic: str = Field(
        default="kafkasql-journal", description="Kafka topic holding the registry's schemas (KafkaSQL storage)"
    )
    registry_compatibility: str = Field(default="BACKWARD", description="global compatibility level set by `up`")
    mqtt_port: int = Field(default=1883, ge=1, le=65535, description="Mosquitto listener")
    mqtt_secure_port: int = Field(
        default=8883, ge=1, le=65535, description="Mosquitto's TLS listener (client certificate and password required)"
    )
    mqtt_max_queued_messages: int = Field(default=100_000, ge=0, description="per-client queue of a persistent session")
    coap_port: int = Field(default=15683, ge=1, le=65535, description="libcoap coap-server (UDP and TCP)")
    es_port: int = Field(default=9200, ge=1, le=65535, description="Elasticsearch HTTP port")
    es_secure_port: int = Field(
        default=9201, ge=1, le=65535, description="HTTPS port of the secured Elasticsearch node (TLS and users)"
    )
    es_secure_transport_port: int = Field(
        default=9301, ge=1, le=65535, description="transport port of the secured Elasticsearch node"
    )
    es_transport_port: int = Field(default=9300, ge=1, le=65535, description="Elasticsearch transport port")
    es_version: str = Field(
        default="8.19.21", description="org.elasticsearch.distribution.integ-test-zip:elasticsearch version (8.x)"
    )
    es_heap: str = Field(default="512m", description="-Xms/-Xmx of Elasticsearch")
    es_java_home: Path | None = Field(
        default=None, description="ES_JAVA_HOME (Java 17+); default: the JDK of the `java` setting"
    )
    es_user: str = Field(default="fluxgate", description="unprivileged user Elasticsearch runs as when we are root")
    unprivileged_home: Path | None = Field(
        default=None,
        description="folder for the servers that run as an unprivileged user (Elasticsearch, Cassandra) when that "
        "user cannot reach the checkout's .local/ (a checkout in root's home or any mode-700 folder); "
        "default: /var/lib/fluxgate-stack/<an id of the checkout>",
    )
    cassandra_port: int = Field(default=9042, ge=1, le=65535, description="Cassandra native protocol (CQL) port")
    cassandra_storage_port: int = Field(default=7000, ge=1, le=65535, description="Cassandra internode (gossip) port")
    cassandra_secure_port: int = Field(
        default=9043, ge=1, le=65535, description="CQL port of the secured Cassandra node (passwords and client TLS)"
    )
    cassandra_secure_storage_port: int = Field(
        default=7001, ge=1, le=65535, description="internode port of the secured Cassandra node"
    )
    cassandra_version: str = Field(default="5.0.9", description="org.apache.cassandra:cassandra-all version (5.0.x)")
    cassandra_heap: str = Field(default="1g", description="-Xms/-Xmx of Cassandra")
    cassandra_user: str = Field(default="fluxgate", description="unprivileged user Cassandra runs as when we are root")
    hazelcast_port: int = Field(default=5701, ge=1, le=65535, description="Hazelcast member port (clients and REST)")
    hazelcast_version: str = Field(default="5.7.0", description="com.hazelcast:hazelcast version (5.x, Java 17)")
    hazelcast_heap: str = Field(default="256m", description="-Xms/-Xmx of the Hazelcast member")
    hazelcast_cluster: str = Field(default="fluxgate", description="Hazelcast cluster name clients must present")
    prometheus_port: int = Field(default=9090, ge=1, le=65535, description="Prometheus HTTP port (API, /alerts)")
    prometheus_scrape_interval: str = Field(
        default="5s", description="Prometheus's scrape and rule evaluation interval (a Prometheus duration)"
    )
    prometheus_retention: str = Field(default="2d", description="how long Prometheus keeps samples")
    java: str = Field(default="java", description="java executable for every Java server (17+)")
    jvm_quick_start: bool = Field(
        default=True, description="C1-only JIT: faster start, lower peak throughput (set false for benchmarks)"
    )
    mvn: str = Field(default="mvn", description="Maven executable used to fetch Java servers")
    timeout: float | None = Field(default=None, gt=0, description="readiness timeout in seconds for every server")

    @property
    def local_dir(self) -> Path:
        """The git-ignored folder holding downloads, configs, data, logs and pidfiles."""
        return (self.home or find_repo_root()) / ".local"

    @property
    def pki_dir(self) -> Path:
        """The stack's CA and server certificate (see :mod:`fluxgate_stack.pki`)."""
        return self.local_dir / "pki"

    @property
    def topic_partitions(self) -> dict[str, int]:
        return parse_topics(self.topics)


def find_repo_root(start: Path | None = None) -> Path:
    """The nearest folder above ``start`` (default: cwd, then this file) that holds ``.git``."""
    candidates = [start] if start else [Path.cwd(), Path(__file__).resolve().parent]
    for origin in candidates:
        for folder in (origin, *origin.parents):
            # A worktree or submodule has a .git file rather than a folder; both count.
            if (folder / ".git").exists():
                return folder
    raise StackError("cannot find the repository root (no .git above); set FLUXGATE_STACK_HOME")


def parse_topics(spec: str) -> dict[str, int]:
    """``"a:6,b"`` -> ``{"a": 6, "b": 3}``; blanks are ignored so trailing commas are harmless."""
    topics: dict[str, int] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, _, count = item.partition(":")
        partitions = int(count) if count.strip() else DEFAULT_PARTITIONS
        if not name.strip() or partitions < 1:
            raise ValueError(f"bad topic spec {item!r}: want name[:partitions>=1]")
        topics[name.strip()] = partitions
    return topics
