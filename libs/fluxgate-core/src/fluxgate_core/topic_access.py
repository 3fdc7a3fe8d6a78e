"""The topics a service writes or reads: there, created, or why not.

At start (:func:`fluxgate_core.kafka_access.verify_kafka`) a topic that cannot be used stops
the service; one met while running (mqtt-proxy's ``INSERT INTO $`` targets, through
:func:`unusable_topics`) is that target's problem, its messages dead-lettered with it. Either
way a missing topic is created when ``kafka.topic_creation.enable`` says so (its partitions,
replication factor and config), else its problem names it, the setting it came from and the
command that creates it: a service never holds records for a topic that is not there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from fluxgate_core.errors import DeliveryError, env_variable
from fluxgate_core.kafka import create_topics
from fluxgate_core.kafka_errors import config_error, converted, describe
from fluxgate_core.settings import KafkaSettings

log = structlog.get_logger(__name__)
# librdkafka's own log lines of these checks' clients (it prints each failed try to stderr).
SILENT = logging.getLogger(f"{__name__}.librdkafka")
SILENT.propagate = False
SILENT.setLevel(logging.CRITICAL)
NO_SUCH_TOPIC = "no such topic"
CREATION = "kafka.topic_creation"


def admin_client(kafka: KafkaSettings, client_id: str, **config: Any) -> AdminClient:
    """An admin client that never creates a topic by looking it up and prints nothing of its own."""
    settings: dict[str, Any] = {**kafka.client_config(client_id), "logger": SILENT, "allow.auto.create.topics": False}
    try:
        return AdminClient({**settings, **config})
    except (KafkaException, ValueError, TypeError) as exc:
        raise config_error(exc, "admin") from exc


def topic_problems(
    admin: AdminClient,
    kafka: KafkaSettings,
    settings: Mapping[str, str],
    env_prefix: str,
    listed: set[str],
    timeout: float,
) -> dict[str, str]:
    """Each topic of ``settings`` (topic -> the setting naming it, or "") that cannot be used, with
    why, its setting named: those not ``listed`` in the cluster's metadata are asked by name (a
    principal is not shown the topics it may not describe), the missing ones created when
    ``kafka.topic_creation`` says so."""
    problems = {
        topic: problem
        for topic in sorted(set(settings) - listed)
        if (problem := _topic_problem(admin, kafka, topic, timeout))
    }
    missing = [topic for topic, problem in problems.items() if problem == NO_SUCH_TOPIC]
    if missing and kafka.topic_creation.enable:
        problems.update(dict.fromkeys(missing, ""))
        problems.update(_create(admin, kafka, missing, env_prefix))
    return {
        topic: _named(f"{topic}: {_explained(problem, topic, kafka, env_prefix)}", settings[topic], env_prefix)
        for topic, problem in problems.items()
        if problem
    }


def unusable_topics(
    kafka: KafkaSettings, client_id: str, topics: Iterable[str], env_prefix: str, timeout: float = 10.0
) -> dict[str, str]:
    """:func:`topic_problems` for topics met while running (the login was checked at start).
    Kafka not answering raises a retriable :class:`DeliveryError`: nothing is decided."""
    admin = admin_client(kafka, client_id)
    try:
        listed = set(admin.list_topics(timeout=timeout).topics)
    except KafkaException as exc:
        raise converted(exc, DeliveryError, "cannot list topics") from exc
    return topic_problems(admin, kafka, dict.fromkeys(topics, ""), env_prefix, listed, timeout)


def _named(problem: str, setting: str, env_prefix: str) -> str:
    if not setting:
        return problem
    return f"{setting} [env {env_variable(env_prefix, setting)}]: {problem}"


def _explained(problem: str, topic: str, kafka: KafkaSettings, env_prefix: str) -> str:
    """A missing topic's problem with the two ways out: the command, or the setting."""
    if problem != NO_SUCH_TOPIC:
        return problem
    group = env_variable(env_prefix, CREATION)
    return (
        f"{NO_SUCH_TOPIC} (nothing could flow through it): create it with `{create_command(topic, kafka)}`, "
        f"or set {group}__ENABLE=true to have this service create it at start ({group}__PARTITIONS, "
        "__REPLICATION_FACTOR and __CONFIG say how)"
    )


def create_command(topic: str, kafka: KafkaSettings) -> str:
    """Kafka's own command that creates ``topic`` as ``kafka.topic_creation`` would."""
    creation = kafka.topic_creation
    words = ["kafka-topics.sh", "--bootstrap-server", kafka.bootstrap_servers, "--create", "--topic", topic]
    if creation.partitions != -1:
        words += ["--partitions", str(creation.partitions)]
    if creation.replication_factor != -1:
        words += ["--replication-factor", str(creation.replication_factor)]
    for name, value in sorted(creation.config.items()):
        words += ["--config", f"{name}={value}"]
    if kafka.security_protocol != "PLAINTEXT":
        words += ["--command-config", "<client properties with this service's login>"]
    return " ".join(words)


def _create(admin: AdminClient, kafka: KafkaSettings, topics: list[str], env_prefix: str) -> dict[str, str]:
    """Create ``topics`` as ``kafka.topic_creation`` says; each refusal (no CREATE grant, a
    replication factor above the brokers' count, a config the broker rejects) as its problem,
    naming the settings. A retriable failure (a timeout) raises."""
    creation, refused = kafka.topic_creation, {}
    for topic in topics:
        try:
            created = create_topics(admin, {topic: creation.partitions}, creation.replication_factor, creation.config)
        except DeliveryError as exc:
            if exc.retriable:
                raise
            refused[topic] = f"{CREATION} [env {env_variable(env_prefix, CREATION)}__*]: {exc}"
            continue
        if created:
            log.info(
                "kafka.topic.created",
                topic=topic,
                partitions=creation.partitions,
                replication_factor=creation.replication_factor,
                config=creation.config,
            )
    return refused


def _topic_problem(admin: AdminClient, kafka: KafkaSettings, topic: str, timeout: float) -> str | None:
    """Why ``topic`` was not in the cluster's list: Kafka leaves out the topics a principal may
    not describe, so only asking for it by name tells absent from forbidden."""
    try:
        entry = admin.list_topics(topic=topic, timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        return describe(exc)
    error = entry.error if entry is not None else None
    if entry is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return NO_SUCH_TOPIC
    if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return f"{kafka.sasl_username or 'this client'} may not use it (an ACL is missing)"
    return error.str() if error is not None else None
