"""Can this service reach Kafka, as itself, and see its topics? Asked once, at start.

librdkafka never fails a client for a refused login or an untrusted certificate: it
reports the refusal once through ``error_cb`` and then retries, so a service with a wrong
password would sit unready forever with one warning in its log. :func:`verify_kafka` turns
each of those into an error that names the setting to fix, before the service says
anything about being ready:

- a refused login (SCRAM or PLAIN): :class:`ConfigError` naming the user and password settings;
- a failed TLS handshake: :class:`ConfigError` naming ``ssl_ca_location``;
- no broker answering: :class:`DeliveryError` naming ``bootstrap_servers``;
- a topic the principal may not see: :class:`ConfigError` naming it and the setting it came from;
- a topic that does not exist: created when ``kafka.topic_creation.enable`` says so (with its
  partitions, replication factor and config), else :class:`ConfigError` naming it, the setting
  it came from and the command that creates it. A service never says it is ready while the
  topics it writes or reads are not there (nothing could flow).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from fluxgate_core.errors import ConfigError, DeliveryError, env_variable
from fluxgate_core.kafka import create_topics
from fluxgate_core.kafka_errors import config_error, describe
from fluxgate_core.settings import KafkaSettings, TopicCreationSettings

log = structlog.get_logger(__name__)
# librdkafka's own log lines of the check's client (it prints each failed try to stderr).
SILENT = logging.getLogger(f"{__name__}.librdkafka")
SILENT.propagate = False
SILENT.setLevel(logging.CRITICAL)
LOGIN_REFUSED = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
NO_SUCH_TOPIC = "no such topic"


class _Reports:
    """What librdkafka said through ``error_cb`` while the check ran (from its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        with self._lock:
            self.errors.append(error)

    def first(self, codes: Iterable[int]) -> KafkaError | None:
        wanted = set(codes)
        with self._lock:
            return next((error for error in self.errors if error.code() in wanted), None)


def verify_kafka(
    kafka: KafkaSettings,
    client_id: str,
    env_prefix: str,
    topics: Iterable[str] | Mapping[str, str] = (),
    timeout: float = 15.0,
) -> None:
    """Log in to Kafka with ``kafka``'s settings and look up ``topics``; raise an error naming
    the setting at fault (``env_prefix``: the service's, e.g. ``FLUXGATE_MQTT_``). ``topics``
    may map each topic to the setting that names it (``{"sensors.readings": "status.input_topic"}``),
    which a topic's problem then names too."""
    reports = _Reports()
    try:
        config: dict[str, Any] = {
            **kafka.client_config(client_id),
            "error_cb": reports,
            "logger": SILENT,  # what it would print, the error this raises says once
            "allow.auto.create.topics": False,  # looking a topic up must never create it
        }
        admin = AdminClient(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise config_error(exc, "admin") from exc
    env = f"{env_prefix.upper()}KAFKA__"
    metadata = _cluster(admin, kafka, env, reports, timeout)
    log.info("kafka.verified", security_protocol=kafka.security_protocol, sasl_username=kafka.sasl_username)
    settings = topics if isinstance(topics, Mapping) else dict.fromkeys(topics, "")
    problems = {
        topic: problem
        for topic in sorted(set(settings) - set(metadata.topics))
        if (problem := _topic_problem(admin, kafka, topic, timeout))
    }
    missing = [topic for topic, problem in problems.items() if problem == NO_SUCH_TOPIC]
    if missing and kafka.topic_creation.enable:
        _create(admin, kafka.topic_creation, missing, env_prefix)
        problems = {topic: problem for topic, problem in problems.items() if topic not in missing}
    if problems:
        lines = [
            _named(f"{topic}: {_explained(problem, topic, kafka, env_prefix)}", settings[topic], env_prefix)
            for topic, problem in problems.items()
        ]
        raise ConfigError("Kafka topics this service needs:\n  " + "\n  ".join(lines))


def _named(problem: str, setting: str, env_prefix: str) -> str:
    if not setting:
        return problem
    return f"{setting} [env {env_variable(env_prefix, setting)}]: {problem}"


def _explained(problem: str, topic: str, kafka: KafkaSettings, env_prefix: str) -> str:
    """A missing topic's problem with the two ways out: the command, or the setting."""
    if problem != NO_SUCH_TOPIC:
        return problem
    group = env_variable(env_prefix, "kafka.topic_creation")
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


def _create(admin: AdminClient, creation: TopicCreationSettings, topics: list[str], env_prefix: str) -> None:
    """Create ``topics`` as ``creation`` says; a refusal (no CREATE grant, a replication factor
    above the brokers' count, a config the broker rejects) names the settings."""
    try:
        created = create_topics(
            admin, dict.fromkeys(topics, creation.partitions), creation.replication_factor, creation.config
        )
    except DeliveryError as exc:
        if exc.retriable:
            raise
        setting = "kafka.topic_creation"
        raise ConfigError(f"{setting} [env {env_variable(env_prefix, setting)}__*]: {exc}") from exc
    for topic in created:
        log.info(
            "kafka.topic.created",
            topic=topic,
            partitions=creation.partitions,
            replication_factor=creation.replication_factor,
            config=creation.config,
        )


def _cluster(admin: AdminClient, kafka: KafkaSettings, env: str, reports: _Reports, timeout: float) -> Any:
    """The cluster's metadata. Asked for a second at a time: librdkafka hands its error reports
    to ``error_cb`` only from ``poll``, never while ``list_topics`` waits, so a refused login
    is seen between two tries (and said within a second or two, not after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            metadata = admin.list_topics(timeout=min(1.0, timeout))
        except KafkaException as exc:
            admin.poll(0)
            refused = _refusal(kafka, env, reports)
            if refused is not None:
                raise refused from None
            if time.monotonic() >= deadline:
                raise DeliveryError(
                    f"kafka.bootstrap_servers [env {env}BOOTSTRAP_SERVERS]: no broker answered at "
                    f"{kafka.bootstrap_servers} within {timeout:g}s ({describe(exc)})",
                    retriable=True,
                ) from exc
            continue
        admin.poll(0)
        refused = _refusal(kafka, env, reports)
        if refused is not None:
            raise refused
        return metadata


def _refusal(kafka: KafkaSettings, env: str, reports: _Reports) -> ConfigError | None:
    """The login or handshake refusal librdkafka reported, as the setting to fix."""
    login = reports.first(LOGIN_REFUSED)
    if login is not None:
        password = "SASL_PASSWORD_FILE" if kafka.sasl_password_file is not None else "SASL_PASSWORD"
        return ConfigError(
            f"kafka.sasl_username / kafka.sasl_password [env {env}SASL_USERNAME, {env}{password}]: Kafka refused "
            f"the login of {kafka.sasl_username!r} with {kafka.sasl_mechanism}: {login.str()}"
        )
    handshake = reports.first({KafkaError._SSL})
    if handshake is not None:
        return ConfigError(
            f"kafka.ssl_ca_location [env {env}SSL_CA_LOCATION]: the TLS handshake with Kafka failed "
            f"(is the broker's certificate signed by this CA?): {handshake.str()}"
        )
    return None


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
