"""Keycloak's and the secured registry's configuration and the clients' secrets, without a server."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from fluxgate_stack.errors import StackError
from fluxgate_stack.secured_registry import ADMIN, CLIENT_ROLES, realm_json, registry_client, registry_env, secrets_file
from fluxgate_stack.servers import default_names, with_requirements
from fluxgate_stack.servers.keycloak import REALM_FILE, KeycloakServer
from fluxgate_stack.servers.registry_secured import SecuredRegistryServer
from fluxgate_stack.settings import StackSettings


@pytest.fixture(autouse=True)
def _stack_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("FLUXGATE_STACK_")]:
        monkeypatch.delenv(name)


def test_neither_starts_with_a_bare_up_and_the_registry_brings_keycloak_and_kafka() -> None:
    assert "keycloak" not in default_names() and "registry-secured" not in default_names()
    assert set(with_requirements(["registry-secured"]) or []) == {"registry-secured", "kafka", "keycloak"}


def test_secrets_are_made_once_private_and_given_as_a_service_environment(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    identity, secret = registry_client("mqtt-proxy", settings)
    assert stat.S_IMODE(secrets_file(settings).stat().st_mode) == 0o600
    assert registry_client("mqtt-proxy", settings) == (identity, secret) and len(secret) >= 32
    assert registry_client("es-persister", settings)[1] != secret
    assert registry_env("FLUXGATE_MQTT_", "mqtt-proxy", settings) == {
        "FLUXGATE_MQTT_REGISTRY__URL": "https://127.0.0.1:8444/apis/ccompat/v7",
        "FLUXGATE_MQTT_REGISTRY__BASIC_AUTH_USER_INFO": f"{identity}:{secret}",
        "FLUXGATE_MQTT_REGISTRY__CA_FILE": str(tmp_path / ".local" / "pki" / "ca.crt"),
    }
    with pytest.raises(StackError, match="unknown registry client"):
        registry_client("nobody", settings)


def test_the_realm_gives_each_client_its_role_and_no_login_flow(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    realm = json.loads(realm_json(settings))
    roles = {user["serviceAccountClientId"]: user["realmRoles"] for user in realm["users"]}
    assert roles["registry-admin"] == ["sr-admin"]
    assert roles["registry-mqtt-proxy"] == ["sr-developer"] and roles["registry-es-persister"] == ["sr-readonly"]
    assert len(roles) == len(CLIENT_ROLES)
    for client in realm["clients"]:
        assert client["serviceAccountsEnabled"] and not client["publicClient"]
        assert not (client["standardFlowEnabled"] or client["directAccessGrantsEnabled"])
    admin = next(client for client in realm["clients"] if client["clientId"] == "registry-admin")
    assert admin["secret"] == registry_client(ADMIN, settings)[1]


def test_keycloak_serves_https_only_and_a_changed_realm_is_imported_again(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    keycloak = KeycloakServer(settings)
    command = keycloak.command()
    assert "--http-enabled=false" in command and f"--https-port={settings.keycloak_port}" in command
    assert "--hostname-strict=false" in command and "--cache=local" in command
    database = keycloak.data_dir / "h2"
    database.mkdir(parents=True)
    keycloak.prepare()
    realm_file = keycloak.import_dir / REALM_FILE
    assert database.is_dir() and stat.S_IMODE(realm_file.stat().st_mode) == 0o600  # same realm: kept

    data = json.loads(secrets_file(settings).read_text()) | {"mqtt-proxy": "a-new-secret"}
    secrets_file(settings).write_text(json.dumps(data))
    assert keycloak.command() != command  # a new realm restarts a running Keycloak
    keycloak.prepare()
    assert not database.exists() and "a-new-secret" in realm_file.read_text()


def test_the_secured_registry_is_https_only_with_authentication_and_roles(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    registry = SecuredRegistryServer(settings)
    jar = registry.home / f"apicurio-registry-app-{settings.registry_version}-runner.jar"
    jar.parent.mkdir(parents=True)
    jar.touch()
    flags = dict(arg[2:].split("=", 1) for arg in registry.command() if arg.startswith("-D"))  # the last one wins
    assert flags["quarkus.http.insecure-requests"] == "disabled"
    assert flags["quarkus.http.ssl-port"] == str(settings.registry_secure_port)
    assert flags["quarkus.oidc.tenant-enabled"] == "true"
    assert flags["apicurio.authn.basic-client-credentials.enabled"] == "true"
    assert flags["apicurio.auth.role-based-authorization"] == "true"
    assert flags["apicurio.kafkasql.topic"] == settings.registry_journal_topic  # the plain one's: one registry
    assert flags["quarkus.oidc.auth-server-url"] == f"https://127.0.0.1:{settings.keycloak_port}/realms/fluxgate"
    assert [port.number for port in registry.ports()] == [settings.registry_secure_port]


def test_a_renewed_certificate_restarts_both(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    registry = SecuredRegistryServer(settings)
    jar = registry.home / f"apicurio-registry-app-{settings.registry_version}-runner.jar"
    jar.parent.mkdir(parents=True)
    jar.touch()
    keycloak = KeycloakServer(settings)
    before = (keycloak.command(), registry.command())
    (settings.pki_dir / "ca.crt").unlink()  # the PKI is made anew, the server certificate with it
    assert keycloak.command() != before[0] and registry.command() != before[1]
