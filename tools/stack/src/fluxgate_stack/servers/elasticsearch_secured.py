"""Elasticsearch with security on: HTTPS from the stack's CA, users, least-privilege roles.

A second single node (``elasticsearch-secured``, not started by a bare ``up``) beside the
lab's open one, on its own ports (9201 HTTPS, 9301 transport) and folders, from the same
integ-test zip (its x-pack-security module has TLS, the file realm and file roles):

- HTTP and transport TLS with the stack's server certificate (:mod:`fluxgate_stack.pki`),
  copied into the node's config folder (the paths in elasticsearch.yml are relative to it), the
  key 0600 and owned by the node's user;
- users of the file realm and file roles (``roles.yml``), one per service that uses
  Elasticsearch, and their passwords' hashes (``users``, 0600): see
  :mod:`fluxgate_stack.secured_elasticsearch`, which also gives them to tests and ``make run``;
- no anonymous access (a request without credentials gets 401).

The reserved ``elastic`` user gets no password from the stack and is not used: the file realm's
``fluxgate-admin`` is the superuser. API keys and the native realm are not available: they live
in the ``.security`` index, which this distribution cannot create (it lacks the analysis-common
module; the node warns once at start that it failed to sync built-in roles to it).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki, ensure_pki
from fluxgate_stack.private_files import write_private
from fluxgate_stack.secured_elasticsearch import (
    ROLES,
    Account,
    credentials_dir,
    ensure_credentials,
    load_account,
    roles_yml,
    users_file,
    users_roles,
)
from fluxgate_stack.servers.base import Port
from fluxgate_stack.servers.elasticsearch import HEALTH_PATH, ElasticsearchServer
from fluxgate_stack.settings import StackSettings

SECURED_HEAP = "384m"
LOGIN_WAIT_SECONDS = 15.0
PROBE_TIMEOUT = 2.0


class ElasticsearchSecuredServer(ElasticsearchServer):
    """Elasticsearch, single node, security on (TLS and users), on loopback."""

    name = "elasticsearch-secured"
    default = False

    def __init__(self, settings: StackSettings) -> None:
        # The parent's settings, moved to this node's ports and heap: its machinery stays as is.
        node = settings.model_copy(
            update={
                "es_port": settings.es_secure_port,
                "es_transport_port": settings.es_secure_transport_port,
                "es_heap": SECURED_HEAP,
            }
        )
        super().__init__(node, extra_settings=security_settings())
        self.certs_dir = self.config_dir / "certs"

    @property
    def url(self) -> str:
        return f"https://{self.settings.host}:{self.settings.es_port}"

    @property
    def pki(self) -> Pki:
        return Pki(self.settings.pki_dir)

    def ports(self) -> list[Port]:
        return [Port(self.settings.es_port), Port(self.settings.es_transport_port)]

    def config_files(self) -> dict[Path, str]:
        # Made here, before the fingerprint is taken: a new certificate or password restarts the node.
        pki = ensure_pki(self.settings.pki_dir, self.settings.host)
        accounts = ensure_credentials(self.settings)
        files = super().config_files()
        files[self.config_dir / "roles.yml"] = roles_yml(accounts)
        files[self.config_dir / "users_roles"] = users_roles(accounts)
        files[self.certs_dir / "server.crt"] = pki.server_cert.read_text()
        files[self.certs_dir / "ca.crt"] = pki.ca_cert.read_text()
        return files

    def prepare(self) -> None:
        """The secrets (the server key, the password hashes) go in 0600, owned by the node's user,
        never through ``config_files`` (which leaves files readable by everyone)."""
        self.certs_dir.mkdir(parents=True, exist_ok=True)
        private = {
            self.certs_dir / "server.key": self.pki.server_key.read_bytes(),
            self.config_dir / "users": users_file(ensure_credentials(self.settings)).encode(),
        }
        for path, data in private.items():
            write_private(path, data)
        super().prepare()  # hands config/ (and so the files above) to the node's user

    def probe(self) -> bool:
        # Only read: `status` probes every server, and must not make passwords for one never started.
        admin = load_account(credentials_dir(self.settings), ROLES["admin"])
        if admin is None:
            return False
        try:
            with self._client(admin.auth) as client:
                return client.get(HEALTH_PATH).status_code == 200
        except httpx.HTTPError:
            return False

    def provision(self) -> None:
        """Each user logs in (the file realm read them at start, or reloads them within seconds)."""
        deadline = time.monotonic() + LOGIN_WAIT_SECONDS
        for role, account in ensure_credentials(self.settings).items():
            while not self._logs_in(account):
                if time.monotonic() > deadline:
                    reason = f"user {account.username} ({role}) cannot log in"
                    raise StackError(f"{self.name}: {reason}; see {self.log_file}")
                time.sleep(0.5)

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_ELASTICSEARCH_SECURE_URL": self.url, "FLUXGATE_ELASTICSEARCH_CA_FILE": str(self.pki.ca_cert)}

    def _logs_in(self, account: Account) -> bool:
        try:
            with self._client(account.auth) as client:
                answer = client.get("/_security/_authenticate")
        except httpx.HTTPError:
            return False
        return answer.status_code == 200 and answer.json().get("username") == account.username

    def _client(self, auth: tuple[str, str]) -> httpx.Client:
        return httpx.Client(base_url=self.url, auth=auth, verify=str(self.pki.ca_cert), timeout=PROBE_TIMEOUT)


def security_settings() -> dict[str, str]:
    """elasticsearch.yml's security part; TLS files relative to the config folder."""
    tls = {
        "key": "certs/server.key",
        "certificate": "certs/server.crt",
        "certificate_authorities": "certs/ca.crt",
    }
    settings = {
        "xpack.security.enabled": "true",
        "xpack.security.http.ssl.enabled": "true",
        # Not required here (single-node discovery bound to loopback skips the transport TLS
        # bootstrap check), but what every production node has: the node is configured as one.
        "xpack.security.transport.ssl.enabled": "true",
        # The stack's certificate is for servers (serverAuth only): with no second node, no
        # peer ever presents one, so only the chain is checked.
        "xpack.security.transport.ssl.verification_mode": "certificate",
    }
    for layer in ("http", "transport"):
        settings.update({f"xpack.security.{layer}.ssl.{key}": value for key, value in tls.items()})
    return settings


__all__ = ["ElasticsearchSecuredServer", "security_settings"]
