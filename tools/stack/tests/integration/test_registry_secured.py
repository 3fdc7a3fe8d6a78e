"""The real secured schema registry (server ``registry-secured``) and its OIDC provider
(server ``keycloak``): HTTPS only, no call without credentials Keycloak accepts, each
service's client held to its role, and a service's serializer round trip through it all.
Subjects are the test's own, deleted afterwards by the admin client.

Uses the root conftest's session fixture ``secured_registry`` (starts Keycloak and the
registry if needed, ~45 s the first time, and leaves them running).
"""

from __future__ import annotations

import json
import ssl
import stat
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from fluxgate_core.serde import AvroDecoder, AvroEncoder, registry_client
from fluxgate_core.settings import RegistrySettings
from fluxgate_stack.secured_registry import ADMIN, secrets_file
from fluxgate_stack.servers.keycloak import KeycloakServer, token

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "SecuredProbe",
    "namespace": "dev.fluxgate.test",
    "fields": [{"name": "device_id", "type": "string"}, {"name": "value", "type": "double"}],
}
SCHEMA_TEXT = json.dumps(SCHEMA)
WRITER, READER = "mqtt-proxy", "es-persister"  # sr-developer, sr-readonly


@pytest.fixture
def subject(secured_registry: Any) -> Iterator[str]:
    name = f"test-secured-{uuid.uuid4().hex[:12]}-value"
    yield name
    admin = SchemaRegistryClient(secured_registry.client_config(ADMIN))
    try:
        admin.delete_subject(name)
        admin.delete_subject(name, permanent=True)
    except SchemaRegistryError:
        pass  # never registered (a test that checks a refusal)


def verify(secured_registry: Any) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(secured_registry.ca_file))


@pytest.mark.parametrize("server", ["registry", "keycloak"])
def test_plain_http_is_not_served(secured_registry: Any, server: str) -> None:
    url = f"{secured_registry.url}/subjects" if server == "registry" else secured_registry.token_url
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.replace("https://", "http://"), timeout=5)


@pytest.mark.parametrize("credentials", [None, ("registry-mqtt-proxy", "not-its-secret"), ("nobody", "nothing")])
def test_no_call_without_credentials_keycloak_accepts(secured_registry: Any, credentials: Any) -> None:
    response = httpx.get(f"{secured_registry.url}/subjects", auth=credentials, verify=verify(secured_registry))
    assert response.status_code == 401


def test_a_certificate_from_another_ca_is_not_trusted(secured_registry: Any) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{secured_registry.url}/subjects", auth=secured_registry.client(READER))  # the system's CAs


def test_a_readonly_client_reads_but_cannot_register(secured_registry: Any, subject: str) -> None:
    reader = SchemaRegistryClient(secured_registry.client_config(READER))
    assert isinstance(reader.get_subjects(), list)
    with pytest.raises(SchemaRegistryError) as refused:
        reader.register_schema(subject, Schema(SCHEMA_TEXT, "AVRO"))
    assert refused.value.http_status_code == 403
    assert subject not in reader.get_subjects()


def test_a_writer_registers_and_a_reader_decodes_what_it_wrote(secured_registry: Any, subject: str) -> None:
    """A service's own serializer and deserializer (fluxgate_core.serde) through TLS and auth."""
    writer = registry_client(settings_of(secured_registry, WRITER))
    encoder = AvroEncoder.registered(writer, subject.removesuffix("-value"), SCHEMA_TEXT, SCHEMA)
    record = {"device_id": "probe-1", "value": 21.5}

    decoded = AvroDecoder(registry_client(settings_of(secured_registry, READER))).decode(encoder.encode(record))

    assert decoded == record


def settings_of(secured_registry: Any, role: str) -> RegistrySettings:
    """The RegistrySettings a service gets from ``secured_registry.env``."""
    env = secured_registry.env("", role)
    return RegistrySettings.model_validate(
        {
            "url": env["REGISTRY__URL"],
            "basic_auth_user_info": env["REGISTRY__BASIC_AUTH_USER_INFO"],
            "ca_file": env["REGISTRY__CA_FILE"],
        }
    )


def test_a_bearer_token_from_keycloak_is_taken_as_well(secured_registry: Any) -> None:
    keycloak = KeycloakServer(secured_registry.settings)
    bearer = token(secured_registry.token_url, secured_registry.client(READER), secured_registry.ca_file)
    headers = {"Authorization": f"Bearer {bearer}"}
    response = httpx.get(f"{secured_registry.url}/subjects", headers=headers, verify=verify(secured_registry))
    assert response.status_code == 200
    assert keycloak.probe()


def test_it_is_the_plain_registry_behind_a_second_secured_door(secured_registry: Any, stack: Any, subject: str) -> None:
    """One journal: a schema registered through the secured door has the same id through the
    plain one (records written by either are read by both), as soon as the plain one has
    replayed the journal's new entry."""
    writer = SchemaRegistryClient(secured_registry.client_config(WRITER))
    schema_id = writer.register_schema(subject, Schema(SCHEMA_TEXT, "AVRO"))
    plain = SchemaRegistryClient({"url": stack.registry_url})
    deadline = time.monotonic() + 30
    while subject not in plain.get_subjects():
        assert time.monotonic() < deadline, "the plain registry never saw the secured one's registration"
        time.sleep(0.2)
    assert plain.get_latest_version(subject).schema_id == schema_id


def test_client_secrets_and_the_realm_file_are_private(secured_registry: Any) -> None:
    realm = KeycloakServer(secured_registry.settings).import_dir / "fluxgate-realm.json"
    for path in (secrets_file(secured_registry.settings), realm):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
