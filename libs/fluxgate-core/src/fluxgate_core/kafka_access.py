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

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from fluxgate_core.errors import ConfigError, DeliveryError
from fluxgate_core.kafka_errors import describe
from fluxgate_core.settings import KafkaSettings
from fluxgate_core.topic_access import admin_client, topic_problems

log = structlog.get_logger(__name__)
LOGIN_REFUSED = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})


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
    admin = admin_client(kafka, client_id, error_cb=reports)
    env = f"{env_prefix.upper()}KAFKA__"
    metadata = _cluster(admin, kafka, env, reports, timeout)
    log.info("kafka.verified", security_protocol=kafka.security_protocol, sasl_username=kafka.sasl_username)
    settings = topics if isinstance(topics, Mapping) else dict.fromkeys(topics, "")
    problems = topic_problems(admin, kafka, settings, env_prefix, set(metadata.topics), timeout)
    if problems:
        raise ConfigError("Kafka topics this service needs:\n  " + "\n  ".join(problems.values()))


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
