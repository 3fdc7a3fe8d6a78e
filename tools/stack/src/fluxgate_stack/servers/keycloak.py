"""Keycloak: the OIDC provider of the secured schema registry (server ``registry-secured``).

25.0.6 because it is the newest Keycloak that runs on Java 17, the stack's JVM (26.x
deprecates 17 and later releases need 21); ``keycloak-quarkus-dist`` is its zip on Maven Central.
It runs in production mode on HTTPS only, with the stack's PEM certificate, a local
(non-clustered) cache and the embedded H2 file database under its data folder.

The realm ``fluxgate`` (see :mod:`fluxgate_stack.secured_registry`) is imported at start
from a file made of the stored client secrets. Keycloak skips a realm that exists, so when
that file changes (a client added) the database, which holds nothing but the realm, is
deleted and the realm imported again; a hash of the file in the command line makes that
change a new configuration, which restarts a running Keycloak.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import ssl
from pathlib import Path

import httpx

from fluxgate_stack import fetch
from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki, ensure_pki
from fluxgate_stack.private_files import write_private
from fluxgate_stack.secured_registry import keycloak_realm_url, realm_json
from fluxgate_stack.servers.base import JavaServer, Port

KEYCLOAK_VERSION = "25.0.6"
KEYCLOAK_HEAP = "384m"
REALM_FILE = "fluxgate-realm.json"


class KeycloakServer(JavaServer):
    """Keycloak (OIDC), realm ``fluxgate``, HTTPS only."""

    name = "keycloak"
    default = False  # only the secured registry needs it
    ready_timeout = 180.0  # the first start creates the database and imports the realm (~40 s here)
    stop_grace = 20.0

    @property
    def home(self) -> Path:
        return self.dist_dir / f"keycloak-{KEYCLOAK_VERSION}"

    @property
    def realm_url(self) -> str:
        return keycloak_realm_url(self.settings)

    @property
    def import_dir(self) -> Path:
        return self.data_dir / "import"

    def ports(self) -> list[Port]:
        # The management interface (health, metrics) binds a port of its own; next to the main one.
        return [Port(self.settings.keycloak_port), Port(self.management_port)]

    @property
    def management_port(self) -> int:
        return self.settings.keycloak_port + 1

    def is_installed(self) -> bool:
        return (self.home / "lib" / "quarkus-run.jar").is_file()

    def install(self) -> None:
        fetch.install_atomically(self.home, self._fetch_dist)

    def _fetch_dist(self, into: Path) -> None:
        coordinate = f"org.keycloak:keycloak-quarkus-dist:{KEYCLOAK_VERSION}:zip"
        archive = fetch.maven_copy_artifact(self.settings.mvn, coordinate, self.build_dir, self.build_dir)
        fetch.unpack_zip(archive, into, strip_top_folder=True)
        archive.unlink()  # ~150 MB, and ~/.m2 keeps a copy anyway

    def command(self) -> list[str]:
        settings = self.settings
        pki = ensure_pki(settings.pki_dir, settings.host)  # before the fingerprint: a new certificate restarts it
        realm_hash = hashlib.sha256(realm_json(settings).encode()).hexdigest()[:16]
        database = f"jdbc:h2:file:{self.data_dir / 'h2' / 'keycloakdb'};NON_KEYWORDS=VALUE"
        return [
            str(self.home / "bin" / "kc.sh"),  # it execs java: the recorded pid is the server's
            f"-Dkeycloak.import={self.import_dir}",
            f"-Dfluxgate.realm={realm_hash}",  # read by no one: makes a changed realm a changed command
            certificate_marker(pki),
            "start",
            "--optimized",
            "--cache=local",  # the default (ispn) clusters over the network
            "--http-enabled=false",
            f"--http-host={settings.host}",
            f"--https-port={settings.keycloak_port}",
            f"--https-certificate-file={pki.server_cert}",
            f"--https-certificate-key-file={pki.server_key}",
            f"--http-management-port={self.management_port}",
            "--hostname-strict=false",  # tokens name the URL they were asked at: 127.0.0.1 here
            f"--db-url={database}",
        ]

    def process_env(self) -> dict[str, str]:
        java_home = Path(os.path.realpath(self.java())).parent.parent
        return {
            **os.environ,
            "JAVA_HOME": str(java_home),
            "JAVA_OPTS_KC_HEAP": f"-Xms64m -Xmx{KEYCLOAK_HEAP}",
            "JAVA_OPTS_APPEND": " ".join(self.jit_options()),
        }

    def prepare(self) -> None:
        realm = realm_json(self.settings)
        realm_file = self.import_dir / REALM_FILE
        if realm_file.is_file() and realm_file.read_text() != realm:
            shutil.rmtree(self.data_dir / "h2", ignore_errors=True)  # imported again from the new file
        self.import_dir.mkdir(parents=True, exist_ok=True)
        write_private(realm_file, realm)  # it holds every client's secret

    def probe(self) -> bool:
        return openid_configuration_ok(self.realm_url, Pki(self.settings.pki_dir).ca_cert)

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_KEYCLOAK_REALM_URL": self.realm_url}


def openid_configuration_ok(realm_url: str, ca_file: Path, timeout: float = 2.0) -> bool:
    """The realm's discovery document answers over TLS verified with ``ca_file``: Keycloak serves
    and the realm is imported."""
    if not ca_file.is_file():
        return False
    try:
        verify = ssl.create_default_context(cafile=str(ca_file))
        response = httpx.get(f"{realm_url}/.well-known/openid-configuration", verify=verify, timeout=timeout)
    except (httpx.HTTPError, ssl.SSLError):
        return False
    return response.status_code == 200


def token(token_url: str, client: tuple[str, str], ca_file: Path) -> str:
    """An access token for ``client`` (``(client_id, secret)``) by the client-credentials grant."""
    verify = ssl.create_default_context(cafile=str(ca_file))
    response = httpx.post(token_url, data={"grant_type": "client_credentials"}, auth=client, verify=verify, timeout=10)
    if response.status_code != 200:
        raise StackError(f"keycloak: no token for {client[0]}: {response.status_code} {response.text[:200]}")
    return str(response.json()["access_token"])


def certificate_marker(pki: Pki) -> str:
    """A system property read by no one, naming the server certificate's hash: a renewed
    certificate (same paths, new content) changes the command, which restarts the server."""
    digest = hashlib.sha256(pki.server_cert.read_bytes()).hexdigest()[:16]
    return f"-Dfluxgate.certificate={digest}"
