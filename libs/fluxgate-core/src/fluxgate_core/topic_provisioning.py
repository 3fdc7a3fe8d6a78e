"""Create the Kafka topics a deployment needs, once, before the services start.

The umbrella Helm chart runs this as a hook Job (``python -m fluxgate_core.topic_provisioning``,
in one of the service images, which all hold fluxgate-core and confluent-kafka): each topic of
``FLUXGATE_TOPICS_TOPICS`` is created with its partitions, replication factor and config when it
is missing; one that exists is left as it is, and where it differs from what was asked (fewer or
more partitions, another replication factor, another value of an asked config) the difference is
logged (``kafka.topic.mismatch``), never changed: shrinking is impossible and growing partitions
moves keys between them, an operator's decision. It logs in with the same Kafka settings as the
services (``FLUXGATE_TOPICS_KAFKA__*``: SASL, TLS, ``SASL_PASSWORD_FILE``), so a refused login
stops it (exit 2) with the setting named. Exit 0 when every topic is there afterwards.
"""

from __future__ import annotations

import sys
from typing import Any

import structlog
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

from fluxgate_core.errors import ConfigError, DeliveryError
from fluxgate_core.kafka import create_topics
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.kafka_errors import describe
from fluxgate_core.lifecycle import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, config_failed
from fluxgate_core.logs import configure_logging
from fluxgate_core.settings import Group, KafkaSettings, LogSettings, group, load_settings, service_config
from fluxgate_core.topic_access import admin_client

NAME = "topic-provisioning"
ENV_PREFIX = "FLUXGATE_TOPICS_"
log = structlog.get_logger(__name__)


class TopicSpec(Group):
    """How one topic is created."""

    partitions: int = Field(3, ge=1, description="partitions")
    replication_factor: int = Field(-1, ge=-1, description="replicas of each partition; -1: the broker's default")
    config: dict[str, str] = Field(default_factory=dict, description='topic-level config, e.g. {"retention.ms": "1"}')

    @field_validator("replication_factor")
    @classmethod
    def _not_zero(cls, count: int) -> int:
        if count == 0:
            raise ValueError("at least 1, or -1 for the broker's default")
        return count


class ProvisioningSettings(BaseSettings):
    """The topics to create and how to reach Kafka (``FLUXGATE_TOPICS_*``)."""

    model_config = service_config(ENV_PREFIX)

    kafka: KafkaSettings = group(KafkaSettings)
    log: LogSettings = group(LogSettings)
    topics: dict[str, TopicSpec] = Field(
        default_factory=dict, description='topic -> {"partitions", "replication_factor", "config"} (JSON)'
    )
    timeout_s: float = Field(30.0, gt=0, description="how long each request to Kafka may take")


def mismatches(spec: TopicSpec, partitions: int, replicas: int, config: dict[str, str]) -> list[str]:
    """How an existing topic differs from ``spec`` (only the configs ``spec`` asks for count)."""
    found = []
    if partitions != spec.partitions:
        found.append(f"partitions {partitions}, asked {spec.partitions}")
    if spec.replication_factor != -1 and replicas != spec.replication_factor:
        found.append(f"replication factor {replicas}, asked {spec.replication_factor}")
    for name, value in sorted(spec.config.items()):
        if config.get(name) != value:
            found.append(f"{name}={config.get(name)}, asked {value}")
    return found


def existing(admin: AdminClient, topics: list[str], timeout: float) -> dict[str, tuple[int, int, dict[str, str]]]:
    """(partitions, replicas of partition 0, config) of each of ``topics`` that exists."""
    metadata = admin.list_topics(timeout=timeout).topics
    present = {name: metadata[name] for name in topics if name in metadata and metadata[name].error is None}
    if not present:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in present]
    configs: dict[str, dict[str, str]] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=timeout).items():
        configs[resource.name] = {key: entry.value for key, entry in future.result(timeout=timeout).items()}
    return {
        name: (len(topic.partitions), len(topic.partitions[0].replicas) if topic.partitions else 0, configs[name])
        for name, topic in present.items()
    }


def provision(settings: ProvisioningSettings) -> dict[str, list[str]]:
    """Create the missing topics; each existing topic's mismatches (empty lists: as asked)."""
    admin = admin_client(settings.kafka, settings.kafka.client_id or NAME)
    wanted = sorted(settings.topics)
    there = existing(admin, wanted, settings.timeout_s)
    report: dict[str, list[str]] = {}
    for name in wanted:
        spec = settings.topics[name]
        if name in there:
            report[name] = mismatches(spec, *there[name])
            if report[name]:
                log.warning("kafka.topic.mismatch", topic=name, differences=report[name], left_as_it_is=True)
            else:
                log.info("kafka.topic.present", topic=name)
            continue
        created = create_topics(admin, {name: spec.partitions}, spec.replication_factor, spec.config)
        report[name] = []
        log.info(
            "kafka.topic.created" if created else "kafka.topic.present",
            topic=name,
            partitions=spec.partitions,
            replication_factor=spec.replication_factor,
            config=spec.config,
        )
    return report


def main() -> int:
    """Provision the topics; 0 when all are there, 2 on bad settings or a refused login or
    creation, 1 when Kafka did not answer."""
    try:
        settings = load_settings(ProvisioningSettings)
    except ConfigError as exc:
        return config_failed(NAME, exc)
    configure_logging(NAME, settings.log)
    try:
        verify_kafka(settings.kafka, settings.kafka.client_id or NAME, ENV_PREFIX, timeout=settings.timeout_s)
        report = provision(settings)
    except ConfigError as exc:
        return config_failed(NAME, exc)
    except DeliveryError as exc:
        log.error("kafka.topics.failed", error=str(exc), retriable=exc.retriable)
        return EXIT_FAILED if exc.retriable else EXIT_CONFIG
    except KafkaException as exc:
        log.error("kafka.topics.failed", error=describe(exc))
        return EXIT_FAILED
    differing = sorted(name for name, found in report.items() if found)
    log.info("kafka.topics.provisioned", topics=len(report), differing=differing)
    return EXIT_OK


def run(argv: list[str] | None = None) -> Any:
    """``python -m fluxgate_core.topic_provisioning`` (no arguments: the environment says all)."""
    if argv:
        print(f"usage: python -m {__name__}  (settings: {ENV_PREFIX}* variables)", file=sys.stderr)
        return EXIT_CONFIG
    return main()


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
