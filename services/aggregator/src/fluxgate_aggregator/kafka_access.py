"""How the job reaches Kafka: Spark's Java client's options from the settings, and a check at
start that Kafka accepts the credentials.

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

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicCollection
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


AdminFactory = Callable[[dict[str, Any]], Any]


def verify_kafka(
    kafka: KafkaSettings,
    env_prefix: str,
    *,
    topics: Mapping[str, str] | None = None,
    groups: Mapping[str, str] | None = None,
    timeout_s: float = 15.0,
    admin_client: AdminFactory = AdminClient,
) -> None:
    """Connect once with ``kafka``'s credentials; raise :class:`ConfigError` naming the setting
    when Kafka refuses them (SASL) or the CA does not verify its certificate (TLS), and when it
    refuses the principal access to one of ``topics`` / ``groups`` (name -> the variable that
    names it; DESCRIBE, which READ and WRITE grant). Kafka not answering within ``timeout_s`` is
    only logged: the job's retries are for that.

    librdkafka reports a refused login only through ``error_cb`` (served by ``poll``), and
    retries it for ever; a metadata request meanwhile just times out. Hence short requests
    with a look at the reported errors between them."""
    refused: list[KafkaError] = []
    lock = threading.Lock()

    def on_error(error: KafkaError) -> None:
        with lock:
            refused.append(error)

    # log_level 0: the refused logins are reported once, below, not by librdkafka on stderr.
    admin = admin_client({**kafka.client_config("fluxgate-aggregator-check"), "error_cb": on_error, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    reached = False
    while not reached and time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            reached = True
        except KafkaException:
            pass
        admin.poll(0)
        with lock:
            failure = next((error for error in refused if _named_settings(kafka, error)), None)
        if failure is not None:
            raise _refused(kafka, env_prefix, failure)
    if not reached:
        log.warning("kafka.unverified", bootstrap=kafka.bootstrap_servers, waited_s=timeout_s)
        return
    _check_access(admin, kafka, env_prefix, topics or {}, groups or {}, deadline)


def _named_settings(kafka: KafkaSettings, error: KafkaError) -> list[str]:
    """The settings a client error is about; none for an error that is not theirs (a broker down)."""
    code, reason = error.code(), error.str()
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        if "mechanism" in reason.lower() and "handshake" in reason.lower():
            return ["security_protocol", "sasl_mechanism"]
        password = "sasl_password_file" if kafka.sasl_password_file is not None else "sasl_password"
        return ["sasl_username", password]
    if code == KafkaError._SSL:
        return ["ssl_ca_location", "security_protocol"]
    return []


def _refused(kafka: KafkaSettings, env_prefix: str, error: KafkaError) -> ConfigError:
    settings = _named_settings(kafka, error)
    named = " / ".join(f"kafka.{name} [env {env_prefix.upper()}KAFKA__{name.upper()}]" for name in settings)
    if error.code() == KafkaError._SSL:
        what = "failed the TLS handshake"
    elif "sasl_mechanism" in settings:
        what = "refused the SASL mechanism"
    else:
        what = "refused the credentials"
    return ConfigError(
        f"invalid configuration:\n  {named}: Kafka at {kafka.bootstrap_servers} {what}"
        f" (user {kafka.sasl_username or '-'}): {error.str()}"
    )


def _check_access(
    admin: Any,
    kafka: KafkaSettings,
    env_prefix: str,
    topics: Mapping[str, str],
    groups: Mapping[str, str],
    deadline: float,
) -> None:
    """A ConfigError naming the variable of the first topic or group the principal may not describe."""
    timeout = max(1.0, deadline - time.monotonic())
    who = f"user {kafka.sasl_username}" if kafka.sasl_username else "this client"
    checks: list[tuple[str, str, Any]] = []
    if topics:
        futures = admin.describe_topics(TopicCollection(list(topics)), request_timeout=timeout)
        checks += [("topic", name, futures[name]) for name in topics]
    if groups:
        futures = admin.describe_consumer_groups(list(groups), request_timeout=timeout)
        checks += [("group", name, futures[name]) for name in groups]
    for kind, name, future in checks:
        try:
            future.result()
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
            if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED):
                variable = env_prefix.upper() + (topics if kind == "topic" else groups)[name]
                raise ConfigError(
                    f"invalid configuration:\n  [env {variable}]: Kafka at {kafka.bootstrap_servers}"
                    f" does not let {who} use {kind} {name!r} ({exc.args[0].name()})"
                ) from None
            # A topic not created yet, Kafka slow to answer: not the settings' fault.
            log.info("kafka.access_unchecked", kind=kind, name=name, error=str(exc))
