"""A second Cassandra node with security on: PasswordAuthenticator, CassandraAuthorizer and
client TLS (required, with the stack's CA-signed certificate), on CQL port 9043.

Not a default server (``fluxgate-stack up cassandra-secured``); its own cluster name, run
and data folders, and ports, so it runs beside the lab's open node. Its roles and their
passwords come from :mod:`fluxgate_stack.secured_cassandra`, applied by :meth:`provision`.

Cassandra reads the PEM key and chain itself (``PEMBasedSslContextFactory``): no keytool, no
JKS. When we are root the node runs as an unprivileged user who cannot read the stack's
0600 key, so the key store is copied into the node's run folder, owned by that user, 0600.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from fluxgate_stack import users
from fluxgate_stack.cql import asks_for_password
from fluxgate_stack.pki import ensure_pki
from fluxgate_stack.private_files import write_private
from fluxgate_stack.secured_cassandra import node, provision
from fluxgate_stack.servers.base import Port
from fluxgate_stack.servers.cassandra import CassandraServer, cassandra_yaml, node_config
from fluxgate_stack.settings import StackSettings

CLUSTER_NAME = "fluxgate-local-secured"
PEM_FACTORY = "org.apache.cassandra.security.PEMBasedSslContextFactory"
# A second JVM beside the lab's node on a shared machine: what auth and TLS need, no more.
HEAP_MIN, HEAP_MAX = "512m", "768m"


class SecuredCassandraServer(CassandraServer):
    """Cassandra 5.0, single node, passwords, authorization and required client TLS."""

    name = "cassandra-secured"
    default = False

    @property
    def keystore(self) -> Path:
        return self.run_dir / "server.pem"

    @property
    def contact_point(self) -> str:
        return f"{self.settings.host}:{self.settings.cassandra_secure_port}"

    def ports(self) -> list[Port]:
        return [Port(self.settings.cassandra_secure_port), Port(self.settings.cassandra_secure_storage_port)]

    def heap_options(self) -> list[str]:
        return [f"-Xms{HEAP_MIN}", f"-Xmx{HEAP_MAX}"]

    def config_files(self) -> dict[Path, str]:
        # The PKI is made here, before the fingerprint is taken: a new certificate is a new configuration.
        pki = ensure_pki(self.settings.pki_dir, self.settings.host)
        config = secured_node_config(self.settings, self.data_dir, self.keystore)
        digest = hashlib.sha256(pki.keystore.read_bytes()).hexdigest()[:16]
        return {
            **super().config_files(),
            self.run_dir / "cassandra.yaml": cassandra_yaml(config) + f"# key store sha256 {digest}\n",
        }

    def prepare(self) -> None:
        super().prepare()
        self._install_keystore()

    def _install_keystore(self) -> None:
        """The stack's key and chain, readable by the node's user alone."""
        source = ensure_pki(self.settings.pki_dir, self.settings.host).keystore
        write_private(self.keystore, source.read_bytes())
        if os.geteuid() == 0:
            users.ensure_system_user(self.settings.cassandra_user)
            shutil.chown(self.keystore, self.settings.cassandra_user, self.settings.cassandra_user)

    def probe(self) -> bool:
        return asks_for_password(node(self.settings))

    def provision(self) -> None:
        provision(self.settings)

    def env(self) -> dict[str, str]:
        return {
            "FLUXGATE_CASSANDRA_SECURE_HOST": self.settings.host,
            "FLUXGATE_CASSANDRA_SECURE_PORT": str(self.settings.cassandra_secure_port),
        }


def secured_node_config(settings: StackSettings, data_dir: Path, keystore: Path) -> dict[str, object]:
    """The open node's cassandra.yaml on the secured ports, with authentication,
    authorization and required client TLS."""
    host, storage_port = settings.host, settings.cassandra_secure_storage_port
    config = node_config(settings, data_dir)
    config.update(
        {
            "cluster_name": CLUSTER_NAME,
            "native_transport_port": settings.cassandra_secure_port,
            "storage_port": storage_port,
            "seed_provider": [
                {
                    "class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
                    "parameters": [{"seeds": f"{host}:{storage_port}"}],
                }
            ],
            "authenticator": "PasswordAuthenticator",
            "authorizer": "CassandraAuthorizer",
            "role_manager": "CassandraRoleManager",
            "client_encryption_options": {
                "enabled": True,
                "optional": False,  # a plaintext client is refused, not served
                "ssl_context_factory": {"class_name": PEM_FACTORY},
                "keystore": str(keystore),  # the PKCS#8 key, then the chain
                "require_client_auth": False,
            },
        }
    )
    return config
