"""The schema registry behind TLS with authentication: a second Apicurio Registry.

HTTPS only (``registry_secure_port``, the stack's PEM certificate; no plain HTTP port is
opened), every call authenticated by an OIDC token from Keycloak (server ``keycloak``) or by
HTTP basic auth with a Keycloak client's id and secret, which Apicurio trades for a token
(``apicurio.authn.basic-client-credentials``: what Confluent clients' ``basic.auth.user.info``
speaks), and role-based authorization from the token's realm roles: ``sr-readonly`` reads,
``sr-developer`` registers too, ``sr-admin`` also sets global rules. Clients and roles:
:mod:`fluxgate_stack.secured_registry`.

It is the same registry as the plain one, a second door to it: both Apicurio instances
replay and append to the one KafkaSQL journal (Apicurio's own way to run replicas), so a
schema has one id whichever door registered it. A pipeline whose services go through this
door (``make run SECURED=1``) therefore reads the records earlier runs wrote through the
plain one, on the same topics, and the checks that decode through the plain one agree.

Apicurio reaches Keycloak over TLS with a JVM trust store holding the stack's CA
(PKCS12, made from the PEM with the JDK's keytool: Java 17 reads no PEM trust store).
"""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path
from typing import ClassVar

import httpx

from fluxgate_stack.errors import InstallError
from fluxgate_stack.pki import Pki, ensure_pki
from fluxgate_stack.secured_registry import ADMIN, keycloak_realm_url, registry_client, secure_url
from fluxgate_stack.servers.base import Port
from fluxgate_stack.servers.keycloak import certificate_marker
from fluxgate_stack.servers.registry import RegistryServer, set_compatibility

# Guards a public certificate's integrity, nothing secret.
TRUSTSTORE_PASSWORD = "fluxgate-stack-ca"  # noqa: S105


class SecuredRegistryServer(RegistryServer):
    """Apicurio Registry over HTTPS with OIDC authentication and role-based authorization."""

    name = "registry-secured"
    default = False
    requires: ClassVar[tuple[str, ...]] = ("kafka", "keycloak")

    @property
    def url(self) -> str:
        return secure_url(self.settings)

    @property
    def pki(self) -> Pki:
        return Pki(self.settings.pki_dir)

    @property
    def truststore(self) -> Path:
        return self.run_dir / "truststore.p12"

    def ports(self) -> list[Port]:
        return [Port(self.settings.registry_secure_port)]

    def command(self) -> list[str]:
        pki = ensure_pki(self.settings.pki_dir, self.settings.host)  # before the fingerprint, as Kafka does
        command = super().command()
        jar = command.index("-jar")
        # Later -D flags win over the plain registry's earlier ones (the JVM keeps the last).
        secured = [certificate_marker(pki), *self._trust(), *self._secured_properties()]
        return [*command[:jar], *secured, *command[jar:]]

    def prepare(self) -> None:
        super().prepare()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.truststore.unlink(missing_ok=True)  # made anew: the CA may have been
        keytool = Path(os.path.realpath(self.java())).parent / "keytool"
        made = subprocess.run(
            [str(keytool), "-importcert", "-noprompt", "-alias", "fluxgate-stack-ca", "-file", str(self.pki.ca_cert),
             "-keystore", str(self.truststore), "-storetype", "PKCS12", "-storepass", TRUSTSTORE_PASSWORD],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            raise InstallError(f"{self.name}: keytool could not make {self.truststore}: {made.stderr.strip()}")

    def probe(self) -> bool:
        """The subjects answered to the admin client: TLS, Keycloak and the token trade all work."""
        try:
            response = httpx.get(f"{self.url}/subjects", auth=registry_client(ADMIN, self.settings),
                                 verify=self._verify(), timeout=5)  # fmt: skip
        except (httpx.HTTPError, ssl.SSLError, OSError):
            return False
        return response.status_code == 200

    def provision(self) -> None:
        client = registry_client(ADMIN, self.settings)
        set_compatibility(self.url, self.settings.registry_compatibility, auth=client, verify=self._verify())

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_SECURE_REGISTRY_URL": self.url, "FLUXGATE_REGISTRY_CA_FILE": str(self.pki.ca_cert)}

    def _verify(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.pki.ca_cert))

    def _trust(self) -> list[str]:
        return [
            f"-Djavax.net.ssl.trustStore={self.truststore}",
            "-Djavax.net.ssl.trustStoreType=PKCS12",
            f"-Djavax.net.ssl.trustStorePassword={TRUSTSTORE_PASSWORD}",
        ]

    def _secured_properties(self) -> list[str]:
        realm = keycloak_realm_url(self.settings)
        props = {
            "quarkus.http.ssl-port": str(self.settings.registry_secure_port),
            "quarkus.http.ssl.certificate.files": str(self.pki.server_cert),
            "quarkus.http.ssl.certificate.key-files": str(self.pki.server_key),
            "quarkus.http.insecure-requests": "disabled",  # no plain HTTP listener at all
            "quarkus.oidc.tenant-enabled": "true",  # Apicurio 3.0's switch for authentication
            "quarkus.oidc.auth-server-url": realm,
            "quarkus.oidc.token-path": f"{realm}/protocol/openid-connect/token",
            "quarkus.oidc.client-id": "registry-api",
            "apicurio.authn.basic-client-credentials.enabled": "true",
            "apicurio.auth.role-based-authorization": "true",
            "apicurio.auth.role-source": "token",
            "apicurio.auth.anonymous-read-access.enabled": "false",
        }
        return [f"-D{key}={value}" for key, value in props.items()]
