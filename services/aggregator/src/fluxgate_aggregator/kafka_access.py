"""How the job reaches Kafka: Spark's Java client's options from the settings, and a check at
start that the principal may use the progress group (``fluxgate_core.kafka_access.verify_kafka``
checks the login, the CA and the topics).

Two kinds of client reach Kafka. Spark's Kafka source and sink (the Java client, in the driver
and the executors) take ``kafka.``-prefixed options: the credentials go in as
``sasl.jaas.config``, built here from ``sasl_username`` and ``sasl_password(_file)``, the CA as
a PEM truststore. The job's own librdkafka clients (the progress group's committer, the
watermark reader) take :meth:`KafkaSettings.client_config`. Neither gets a secret from a plain
setting: ``extra`` and ``java_extra`` refuse them.

Spark redacts an option whose key or value matches ``spark.redaction.regex`` (by default
``(?i)secret|password|token|access[.]key``) wherever it shows options (plans, the UI, the event
log): the JAAS value always holds ``password=``. The Java client hides ``sasl.jaas.config``
when it logs its configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from fluxgate_aggregator.settings import AggregatorKafkaSettings
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import KafkaSettings

log = structlog.get_logger(__name__)

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
TLS = ("SSL", "SASL_SSL")


def jaas_quoted(value: str) -> str:
    """``value`` as a quoted JAAS option value. Kafka's ``JaasConfig`` reads it with
    ``java.io.StreamTokenizer``: a backslash escapes the next character (``\\n`` and ``\\r``
    are line breaks), and a raw line break would end the value."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """The Java client's ``sasl.jaas.config`` for ``mechanism`` (PLAIN or SCRAM-SHA-*)."""
    module = LOGIN_MODULES[mechanism]
    return f"{module} required username={jaas_quoted(username)} password={jaas_quoted(password)};"


def spark_kafka_options(kafka: AggregatorKafkaSettings) -> dict[str, str]:
    """Options of Spark's Kafka source and sink: ``java_extra``, then what the settings give
    (brokers, protocol, credentials, CA). The password file is read now: build them again to
    pick up a rotated password."""
    options = {f"kafka.{key}": value for key, value in kafka.java_extra.items()}
    options["kafka.bootstrap.servers"] = kafka.bootstrap_servers
    options["kafka.security.protocol"] = kafka.security_protocol
    if kafka.sasl_mechanism:
        options["kafka.sasl.mechanism"] = kafka.sasl_mechanism
        options["kafka.sasl.jaas.config"] = jaas_config(
            kafka.sasl_mechanism, kafka.sasl_username or "", kafka.password() or ""
        )
    if kafka.ssl_ca_location and kafka.security_protocol in TLS:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = kafka.ssl_ca_location
    return options


def spark_sink_options(kafka: AggregatorKafkaSettings) -> dict[str, str]:
    """Options of Spark's Kafka sink: the source's, and the producer's batching and compression
    from ``linger_ms`` and ``compression_type``, as the other services' producers take them (the
    job has no producer of its own). Not given to the source, whose consumer would log each as
    an unknown configuration."""
    options = spark_kafka_options(kafka)
    options["kafka.linger.ms"] = str(kafka.linger_ms)
    options["kafka.compression.type"] = kafka.compression_type
    return options


AdminFactory = Callable[[dict[str, Any]], Any]


def verify_group(
    kafka: KafkaSettings,
    env_prefix: str,
    group: str,
    *,
    timeout_s: float = 15.0,
    admin_client: AdminFactory = AdminClient,
) -> None:
    """A :class:`ConfigError` naming ``PROGRESS_GROUP`` when Kafka does not let the principal
    use ``group`` (DESCRIBE, which READ grants): its commits would only be logged, batch after
    batch, and lag tools would not see the job. Run after ``fluxgate_core``'s ``verify_kafka``
    (the login and the topics); anything but a refusal is left to the committer's warnings."""
    admin = admin_client({**kafka.client_config("fluxgate-aggregator-check"), "log_level": 0})
    future = admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]
    try:
        future.result()
    except KafkaException as exc:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if error is None or error.code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
            log.warning("kafka.group_unchecked", group=group, error=str(exc))
            return
        who = f"user {kafka.sasl_username}" if kafka.sasl_username else "this client"
        raise ConfigError(
            f"progress_group [env {env_prefix.upper()}PROGRESS_GROUP]: Kafka at {kafka.bootstrap_servers} does not"
            f" let {who} use group {group!r} ({error.name()}): grant it READ, or set the variable empty"
        ) from None
