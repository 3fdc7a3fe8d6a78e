"""Clients of the secured schema registry (server ``registry-secured``): one Keycloak client
per service, each a service account holding one registry role, and an admin for the stack.

Apicurio authenticates with OIDC tokens from Keycloak (server ``keycloak``); a client that only
speaks ``user:password`` (Confluent's ``basic.auth.user.info``) sends its client id and secret,
which the registry trades at Keycloak for a token (client-credentials grant). Roles, checked by
the registry on every call: ``sr-developer`` for the services that register schemas,
``sr-readonly`` for the ones that only read them, ``sr-admin`` for the stack's provisioning.

Secrets are random, made once and kept in ``.local/pki/registry-secured.json`` (mode 0600,
beside the CA's key); the realm Keycloak imports is made from them. A service's environment::

    from fluxgate_stack.secured_registry import registry_env
    env = registry_env("FLUXGATE_MQTT_", "mqtt-proxy")
    # FLUXGATE_MQTT_REGISTRY__URL=https://127.0.0.1:8444/apis/ccompat/v7, __BASIC_AUTH_USER_INFO, __CA_FILE
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki
from fluxgate_stack.private_files import locked, write_private
from fluxgate_stack.settings import StackSettings

__all__ = [
    "ADMIN",
    "CLIENT_ROLES",
    "REALM",
    "SecuredRegistry",
    "realm_json",
    "registry_client",
    "registry_env",
    "secrets_file",
]

RegistryRole = Literal["sr-admin", "sr-developer", "sr-readonly"]
REALM = "fluxgate"
ADMIN = "admin"  # the stack's own client: sets the global compatibility rule on `up`
CCOMPAT_PATH = "/apis/ccompat/v7"  # as servers/registry.py's; not imported: that would import every server
#: Each client's registry role. The gateways, device-status (its status schema), the aggregator
#: (its output schema) and the console (its replay audit schema) register; persisters only read.
CLIENT_ROLES: dict[str, RegistryRole] = {
    ADMIN: "sr-admin",
    "mqtt-proxy": "sr-developer",
    "coap-ingest": "sr-developer",
    "device-status": "sr-developer",
    "aggregator": "sr-developer",
    "console": "sr-developer",
    "es-persister": "sr-readonly",
    "scylla-persister": "sr-readonly",
    "hazelcast-persister": "sr-readonly",
}


def secrets_file(settings: StackSettings | None = None) -> Path:
    return (settings or StackSettings()).pki_dir / "registry-secured.json"


def client_id(name: str) -> str:
    """The Keycloak client id of ``name`` (a service, or ``admin``)."""
    return f"registry-{name}"


def registry_client(role: str, settings: StackSettings | None = None) -> tuple[str, str]:
    """``(client_id, secret)`` of ``role`` (a service of :data:`CLIENT_ROLES`, or ``admin``);
    the secret is made (once) if it is not yet."""
    if role not in CLIENT_ROLES:
        raise StackError(f"unknown registry client {role!r}: want one of {', '.join(CLIENT_ROLES)}")
    return client_id(role), client_secrets(settings)[role]


def registry_env(prefix: str, role: str, settings: StackSettings | None = None) -> dict[str, str]:
    """A service's ``REGISTRY__*`` environment for the secured registry as ``role``, e.g.
    ``registry_env("FLUXGATE_ES_", "es-persister")``."""
    settings = settings or StackSettings()
    identity, secret = registry_client(role, settings)
    return {
        f"{prefix}REGISTRY__URL": secure_url(settings),
        f"{prefix}REGISTRY__BASIC_AUTH_USER_INFO": f"{identity}:{secret}",
        f"{prefix}REGISTRY__CA_FILE": str(Pki(settings.pki_dir).ca_cert),
    }


def secure_url(settings: StackSettings) -> str:
    return f"https://{settings.host}:{settings.registry_secure_port}{CCOMPAT_PATH}"


def keycloak_realm_url(settings: StackSettings) -> str:
    return f"https://{settings.host}:{settings.keycloak_port}/realms/{REALM}"


@dataclass(frozen=True)
class SecuredRegistry:
    """Where the secured registry is, for tests and scripts: ``url``, ``ca_file``,
    ``client(role)`` (``(client_id, secret)``) and a service's ``env(prefix, role)``."""

    settings: StackSettings

    @property
    def url(self) -> str:
        return secure_url(self.settings)

    @property
    def ca_file(self) -> Path:
        return Pki(self.settings.pki_dir).ca_cert

    @property
    def token_url(self) -> str:
        return f"{keycloak_realm_url(self.settings)}/protocol/openid-connect/token"

    def client(self, role: str) -> tuple[str, str]:
        return registry_client(role, self.settings)

    def env(self, prefix: str, role: str) -> dict[str, str]:
        return registry_env(prefix, role, self.settings)

    def client_config(self, role: str) -> dict[str, str]:
        """confluent-kafka ``SchemaRegistryClient`` settings as ``role``."""
        identity, secret = self.client(role)
        return {"url": self.url, "ssl.ca.location": str(self.ca_file), "basic.auth.user.info": f"{identity}:{secret}"}


def client_secrets(settings: StackSettings | None = None) -> dict[str, str]:
    """Every client's secret, made (once, under a lock) for the clients that have none yet."""
    path = secrets_file(settings)
    known = _read(path)
    if all(name in known for name in CLIENT_ROLES):
        return known
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.with_suffix(".lock")):
        known = _read(path)  # another process may have made them meanwhile
        missing = [name for name in CLIENT_ROLES if name not in known]
        if missing:
            known |= {name: secrets.token_urlsafe(24) for name in missing}
            write_private(path, json.dumps(known, indent=2, sort_keys=True) + "\n")
    return known


def realm_json(settings: StackSettings | None = None) -> str:
    """The realm Keycloak imports: the registry's roles, and per client a confidential client
    with a service account holding its role (no user logins, no browser flows)."""
    known = client_secrets(settings)
    realm: dict[str, Any] = {
        "realm": REALM,
        "enabled": True,
        "accessTokenLifespan": 300,
        "roles": {"realm": [{"name": role} for role in sorted(set(CLIENT_ROLES.values()))]},
        "clients": [_client(name, known[name]) for name in CLIENT_ROLES],
        "users": [
            {
                "username": f"service-account-{client_id(name)}",
                "enabled": True,
                "serviceAccountClientId": client_id(name),
                "realmRoles": [role],
            }
            for name, role in CLIENT_ROLES.items()
        ],
    }
    return json.dumps(realm, indent=2, sort_keys=True) + "\n"


def _client(name: str, secret: str) -> dict[str, Any]:
    return {
        "clientId": client_id(name),
        "enabled": True,
        "publicClient": False,
        "clientAuthenticatorType": "client-secret",
        "secret": secret,
        "serviceAccountsEnabled": True,
        "standardFlowEnabled": False,
        "implicitFlowEnabled": False,
        "directAccessGrantsEnabled": False,
    }


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StackError(f"registry-secured: cannot read {path}: {exc}; delete it to make new secrets") from exc
    return {str(name): str(secret) for name, secret in data.items()}
