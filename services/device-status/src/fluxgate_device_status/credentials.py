"""faust's ``broker_credentials`` from the Kafka settings, and a login checked before faust starts.

faust maps its credentials onto aiokafka's (``security_protocol``, ``sasl_mechanism``,
``sasl_plain_username``/``_password``, ``ssl_context``) for every client it makes: the
consumer, the producer and, through their clients, the topic creation of the changelog and
the checks topic. ``SASLCredentials`` takes any of aiokafka's mechanisms by name, SCRAM-SHA-256
and -512 included (its ``mechanism`` is faust's ``SASLMechanism`` enum).

The password is not copied into faust's configuration: :class:`SettingsSASLCredentials`
reads it from :meth:`KafkaSettings.password` (the secret setting, or the file read again)
each time faust makes a client, and its ``repr`` shows the user only.

Left to faust, a refused login ends its start with aiokafka's ``KafkaConnectionError``
("Unable to bootstrap") and a traceback, naming no setting; librdkafka (the end-offsets
client) reports it through ``error_cb`` and retries. :func:`check_login` logs in once with
the same settings before faust starts and turns a refusal into one line naming the settings
to fix. (``fluxgate_core.kafka_access.verify_kafka`` does the same for the other services, but
lets librdkafka print its own lines to stderr around that one, in no fixed order.)
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
from faust.auth import SASLCredentials, SSLCredentials
from faust.types.auth import CredentialsT

from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.kafka_errors import config_error, describe
from fluxgate_core.settings import KafkaSettings

log = structlog.get_logger(__name__)
ENV = "FLUXGATE_STATUS_KAFKA__"
LOGIN_REFUSED = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
# The check's librdkafka logs: what matters comes through error_cb, into the one line.
_LIBRDKAFKA = logging.getLogger(f"{__name__}.librdkafka")
_LIBRDKAFKA.propagate = False
_LIBRDKAFKA.setLevel(logging.CRITICAL)


class SettingsSASLCredentials(SASLCredentials):
    """faust's SASL credentials whose password comes from the settings when a client is made."""

    def __init__(self, kafka: KafkaSettings, ssl_context: ssl.SSLContext | None) -> None:
        super().__init__(username=kafka.sasl_username, ssl_context=ssl_context, mechanism=kafka.sasl_mechanism)
        self._kafka = kafka

    @property
    def password(self) -> str | None:
        """Read now: from ``sasl_password``, or ``sasl_password_file`` again (a rotated Secret)."""
        return self._kafka.password()

    @password.setter
    def password(self, value: str | None) -> None:
        if value is not None:  # faust's __init__ sets None; the password lives in the settings only
            raise AttributeError("the password comes from the Kafka settings")


def broker_credentials(kafka: KafkaSettings) -> CredentialsT | None:
    """faust's ``broker_credentials`` for ``kafka``'s protocol (None for PLAINTEXT)."""
    tls = tls_context(kafka) if kafka.security_protocol in ("SSL", "SASL_SSL") else None
    if kafka.security_protocol.startswith("SASL_"):
        return SettingsSASLCredentials(kafka, tls)
    return SSLCredentials(tls) if tls is not None else None


def tls_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """A client context that checks the broker's certificate and host name, trusting the CAs
    in ``ssl_ca_location`` (a PEM file or a folder of them), or the system's without it."""
    location = kafka.ssl_ca_location
    try:
        if location is None:
            return ssl.create_default_context()
        if Path(location).is_dir():
            return ssl.create_default_context(capath=location)
        return ssl.create_default_context(cafile=location)
    except ssl.SSLError as exc:  # not PEM, or no certificate in it
        raise _unloadable(location, exc.reason or str(exc)) from None
    except OSError as exc:
        raise _unloadable(location, exc.strerror or str(exc)) from None


def _unloadable(location: str | None, reason: str) -> ConfigError:
    return ConfigError(
        f"kafka.ssl_ca_location [env {ENV}SSL_CA_LOCATION]: cannot load CA certificates from {location}: {reason}"
    )


class _Reports:
    """What librdkafka said through ``error_cb`` (served by ``poll``, in the checking thread;
    guarded anyway)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        with self._lock:
            self.errors.append(error)

    def last(self) -> KafkaError | None:
        with self._lock:
            return self.errors[-1] if self.errors else None

    def first(self, codes: frozenset[int]) -> KafkaError | None:
        with self._lock:
            return next((error for error in self.errors if error.code() in codes), None)


def check_login(kafka: KafkaSettings, client_id: str, topics: dict[str, str], timeout_s: float = 15.0) -> None:
    """Log in to Kafka with ``kafka``'s security settings and look ``topics`` up (each topic's
    setting, e.g. ``{"sensors.readings": "status.input_topic"}``).

    Raises :class:`ConfigError` naming the user and password settings for a refused login,
    ``ssl_ca_location`` for a failed TLS handshake, a topic's setting when the user may not use
    it; :class:`FluxgateError` naming ``bootstrap_servers`` when no broker answered within
    ``timeout_s``. Nothing to check over PLAINTEXT (no login): faust starts as before."""
    if kafka.security_protocol == "PLAINTEXT":
        return
    reports = _Reports()
    try:
        config: dict[str, Any] = {
            **kafka.client_config(client_id),
            "error_cb": reports,
            "allow.auto.create.topics": False,  # looking a topic up must not create it
            "logger": _LIBRDKAFKA,
        }
        admin = AdminClient(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise config_error(exc, "admin") from exc
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=min(1.0, max(deadline - time.monotonic(), 0.1)))
            break
        except KafkaException as exc:
            last: BaseException = exc
        admin.poll(0.1)  # serves error_cb
        refused = _refusal(kafka, reports)
        if refused is not None:
            raise refused
        if time.monotonic() >= deadline:
            reported = reports.last()
            raise FluxgateError(
                f"kafka.bootstrap_servers [env {ENV}BOOTSTRAP_SERVERS]: no broker answered at "
                f"{kafka.bootstrap_servers} within {timeout_s:g}s ({reported.str() if reported else describe(last)})"
            )
    log.info(
        "kafka.login_checked",
        security_protocol=kafka.security_protocol,
        sasl_mechanism=kafka.sasl_mechanism,
        sasl_username=kafka.sasl_username,
    )
    forbidden = [
        f"{setting} [env FLUXGATE_STATUS_{setting.upper().replace('.', '__')}]: "
        f"{kafka.sasl_username or 'this client'} may not use {topic} (an ACL is missing)"
        for topic, setting in topics.items()
        if _forbidden(admin, topic, timeout_s)
    ]
    if forbidden:
        raise ConfigError("; ".join(forbidden))


def _forbidden(admin: AdminClient, topic: str, timeout_s: float) -> bool:
    """Whether Kafka refuses to describe ``topic`` to this user (a topic it does not know, or
    an answer that does not come, is left to faust)."""
    try:
        entry = admin.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
    except KafkaException:
        return False
    error = entry.error if entry is not None else None
    return error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _refusal(kafka: KafkaSettings, reports: _Reports) -> ConfigError | None:
    """The login or handshake refusal librdkafka reported, as the settings to fix."""
    login = reports.first(LOGIN_REFUSED)
    if login is not None:
        password = "SASL_PASSWORD_FILE" if kafka.sasl_password_file is not None else "SASL_PASSWORD"
        return ConfigError(
            f"kafka.sasl_username / kafka.{password.lower()} [env {ENV}SASL_USERNAME, {ENV}{password}]: "
            f"Kafka refused the login of {kafka.sasl_username!r} with {kafka.sasl_mechanism}: {login.str()}"
        )
    handshake = reports.first(frozenset({KafkaError._SSL}))
    if handshake is not None:
        return ConfigError(
            f"kafka.ssl_ca_location [env {ENV}SSL_CA_LOCATION]: the TLS handshake with Kafka failed "
            f"(is the broker's certificate signed by this CA, for this host name?): {handshake.str()}"
        )
    return None
