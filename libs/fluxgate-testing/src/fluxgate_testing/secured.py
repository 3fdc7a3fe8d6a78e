"""Principals on the local stack's SASL_SSL Kafka listener, for tests: behind the root
conftest's ``secured_kafka`` fixture.

Each principal gets a unique user name and a random password (also in a 0600 file, what a
service reads through ``..._KAFKA__SASL_PASSWORD_FILE``), exactly the ACLs it is given, and
is removed when the session ends. Grants are :class:`fluxgate_stack.Grant`; a service's own
are ``fluxgate_stack.SERVICE_GRANTS[service]``, put on a test's own topics and groups with
``fluxgate_stack.renamed``.
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fluxgate_stack import Grant


@dataclass(frozen=True)
class Principal:
    """A SCRAM user of the SASL_SSL listener and how to connect as it."""

    username: str
    password: str
    password_file: Path  # holds the password, mode 0600
    bootstrap: str  # the SASL_SSL listener's host:port
    ca_file: Path  # the stack's CA certificate (PEM)
    mechanism: str = "SCRAM-SHA-512"

    def kafka_env(self, prefix: str) -> dict[str, str]:
        """A service's Kafka settings for this principal, e.g. for prefix ``FLUXGATE_MQTT_``:
        ``FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS``, ``..._SECURITY_PROTOCOL`` (SASL_SSL),
        ``..._SASL_MECHANISM``, ``..._SASL_USERNAME``, ``..._SASL_PASSWORD_FILE``, ``..._SSL_CA_LOCATION``."""
        group = f"{prefix if prefix.endswith('_') else prefix + '_'}KAFKA__"
        return {
            f"{group}BOOTSTRAP_SERVERS": self.bootstrap,
            f"{group}SECURITY_PROTOCOL": "SASL_SSL",
            f"{group}SASL_MECHANISM": self.mechanism,
            f"{group}SASL_USERNAME": self.username,
            f"{group}SASL_PASSWORD_FILE": str(self.password_file),
            f"{group}SSL_CA_LOCATION": str(self.ca_file),
        }

    def kafka_config(self) -> dict[str, Any]:
        """librdkafka (confluent-kafka) properties for this principal."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": self.mechanism,
            "sasl.username": self.username,
            "sasl.password": self.password,
            "ssl.ca.location": str(self.ca_file),
        }


class SecuredKafka:
    """The SASL_SSL listener: ``bootstrap``, ``ca_file`` and :meth:`principal`."""

    def __init__(self, bootstrap: str, ca_file: Path, folder: Path) -> None:
        self.bootstrap = bootstrap
        self.ca_file = ca_file
        self._folder = folder
        self._principals: list[Principal] = []

    def principal(self, name: str, grants: Iterable[Grant], mechanism: str = "SCRAM-SHA-512") -> Principal:
        """A new principal ``<name>-<8 hex>`` allowed exactly ``grants``; it logs in as soon as
        this returns."""
        from fluxgate_stack import add_principal

        username = f"{name}-{uuid.uuid4().hex[:8]}"
        password = secrets.token_urlsafe(24)
        password_file = self._folder / f"{username}.password"
        descriptor = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(password)
        principal = Principal(username, password, password_file, self.bootstrap, self.ca_file, mechanism)
        self._principals.append(principal)  # before it exists: a half-made one is removed too
        add_principal(username, password, grants, mechanism)
        return principal

    def close(self) -> None:
        """Remove every principal made here (credentials and ACLs)."""
        from fluxgate_stack import remove_principal

        while self._principals:
            remove_principal(self._principals.pop().username)
