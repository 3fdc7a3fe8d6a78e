"""Principals on the local stack's SASL_SSL Kafka listener, for tests: behind the root
conftest's ``secured_kafka`` fixture.

Each principal gets a unique user name and a random password (also in a 0600 file, what a
service reads through ``..._KAFKA__SASL_PASSWORD_FILE``), exactly the ACLs it is given, and
is removed when the session ends. Grants are :class:`fluxgate_stack.Grant`; a service's own
are ``fluxgate_stack.SERVICE_GRANTS[service]``, put on a test's own topics and groups with
``fluxgate_stack.renamed``. :class:`Principal` is ``fluxgate_stack``'s, which ``make run
SECURED=1`` uses too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

from fluxgate_stack import Grant, Principal, add_principal, new_credentials, remove_principal

__all__ = ["Principal", "SecuredKafka"]


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
        principal = new_credentials(f"{name}-{uuid.uuid4().hex[:8]}", self._folder, mechanism)
        self._principals.append(principal)  # before it exists: a half-made one is removed too
        add_principal(principal.username, principal.password, grants, mechanism)
        return principal

    def close(self) -> None:
        """Remove every principal made here (credentials and ACLs)."""
        while self._principals:
            remove_principal(self._principals.pop().username)
