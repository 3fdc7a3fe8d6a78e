"""faust's ``broker_credentials`` from the Kafka settings.

faust maps its credentials onto aiokafka's (``security_protocol``, ``sasl_mechanism``,
``sasl_plain_username``/``_password``, ``ssl_context``) for every client it makes: the
consumer, the producer and, through their clients, the topic creation of the changelog and
the checks topic. ``SASLCredentials`` takes any of aiokafka's mechanisms by name, SCRAM-SHA-256
and -512 included (its ``mechanism`` is faust's ``SASLMechanism`` enum).

The password is not copied into faust's configuration: :class:`SettingsSASLCredentials`
reads it from :meth:`KafkaSettings.password` (the secret setting, or the file read again)
each time faust makes a client, and its ``repr`` shows the user only.

Left to faust, a refused login ends its start with aiokafka's ``KafkaConnectionError``
("Unable to bootstrap") and a traceback, naming no setting: ``app.main`` logs in once first
with ``fluxgate_core.kafka_access.verify_kafka``, which names the settings to fix.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import structlog
from faust.auth import SASLCredentials, SSLCredentials
from faust.types.auth import CredentialsT

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import KafkaSettings

log = structlog.get_logger(__name__)
ENV = "FLUXGATE_STATUS_KAFKA__"


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
