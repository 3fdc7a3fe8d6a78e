"""The secured Elasticsearch node's configuration and credentials, without a node."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from fluxgate_stack import servers
from fluxgate_stack.errors import StackError
from fluxgate_stack.secured_elasticsearch import (
    ROLES,
    credentials_dir,
    elasticsearch_env,
    elasticsearch_password_file,
    elasticsearch_user,
    ensure_credentials,
    pbkdf2_hash,
    pbkdf2_matches,
)
from fluxgate_stack.servers.elasticsearch_secured import ElasticsearchSecuredServer
from fluxgate_stack.settings import StackSettings


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StackSettings:
    for name in [name for name in os.environ if name.startswith("FLUXGATE_STACK_")]:
        monkeypatch.delenv(name)
    # es_java_home: the JDK is named, not looked for (unit tests run where no java may be)
    return StackSettings(home=tmp_path, es_java_home=tmp_path / "jdk")


def test_it_is_started_only_when_asked_for_on_its_own_ports_and_folders(settings: StackSettings) -> None:
    assert "elasticsearch-secured" not in servers.default_names()
    (server,) = servers.build(["elasticsearch-secured"], settings)
    assert isinstance(server, ElasticsearchSecuredServer)
    assert [port.number for port in server.ports()] == [9201, 9301]
    assert server.url == "https://127.0.0.1:9201"
    assert server.run_dir.name == "elasticsearch-secured" and server.data_dir.name == "elasticsearch-secured"


def test_security_tls_and_the_file_roles_are_configured(settings: StackSettings) -> None:
    server = ElasticsearchSecuredServer(settings)
    files = {path.name: text for path, text in server.config_files().items()}
    yml = files["elasticsearch.yml"]
    for wanted in (
        'xpack.security.enabled: "true"',
        'xpack.security.http.ssl.enabled: "true"',
        'xpack.security.http.ssl.certificate: "certs/server.crt"',
        'xpack.security.transport.ssl.enabled: "true"',
        'http.port: "9201"',
        'transport.port: "9301"',
    ):
        assert wanted in yml
    assert "-Xmx384m" in files["jvm.options"]
    roles = dict(line.split(": ", 1) for line in files["roles.yml"].splitlines() if not line.startswith("#"))
    console = json.loads(roles["fluxgate_console"])
    assert console["indices"][0]["privileges"] == ["read", "monitor", "view_index_metadata"]
    assert "write" not in json.dumps(console) and "index" not in console["indices"][0]["privileges"]
    assert files["users_roles"].splitlines() == [f"{spec.role}:{spec.username}" for spec in ROLES.values()]
    # The passwords, their hashes and the server key never go through config_files (left 0644).
    written = "".join(files.values())
    for account in ensure_credentials(settings).values():
        assert account.password not in written and account.password_hash not in written
    assert "PRIVATE KEY" not in written


def test_passwords_are_made_once_private_and_reused(settings: StackSettings) -> None:
    first = elasticsearch_user("es-persister", settings)
    assert first == elasticsearch_user("es-persister", settings)
    assert first[0] == "fluxgate-es-persister" and len(first[1]) >= 32
    folder = credentials_dir(settings)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in folder.glob("fluxgate-*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert elasticsearch_password_file("es-persister", settings).read_text() == first[1]
    assert len({elasticsearch_user(role, settings)[1] for role in ROLES}) == len(ROLES)


def test_a_password_whose_hash_is_gone_is_made_anew(settings: StackSettings) -> None:
    old = elasticsearch_user("console", settings)[1]
    (credentials_dir(settings) / "fluxgate-console.hash").unlink()
    new = elasticsearch_user("console", settings)[1]
    assert new != old and pbkdf2_matches(new, ensure_credentials(settings)["console"].password_hash)


def test_the_hash_is_elasticsearchs_pbkdf2_form() -> None:
    salt = bytes(range(32))
    stored = pbkdf2_hash("secret", salt)
    head, salt_b64, key_b64 = stored.split("$")
    assert head == "{PBKDF2}10000" and base64.b64decode(salt_b64) == salt
    assert base64.b64decode(key_b64) == hashlib.pbkdf2_hmac("sha512", b"secret", salt, 10_000, dklen=32)
    assert pbkdf2_matches("secret", stored) and not pbkdf2_matches("Secret", stored)
    assert not pbkdf2_matches("secret", "garbage")


def test_a_services_environment_names_hosts_user_password_file_and_ca(settings: StackSettings) -> None:
    env = elasticsearch_env("FLUXGATE_ES_", "ELASTICSEARCH", "es-persister", settings)
    assert env == {
        "FLUXGATE_ES_ELASTICSEARCH__HOSTS": '["https://127.0.0.1:9201"]',
        "FLUXGATE_ES_ELASTICSEARCH__USERNAME": "fluxgate-es-persister",
        "FLUXGATE_ES_ELASTICSEARCH__PASSWORD_FILE": str(credentials_dir(settings) / "fluxgate-es-persister.password"),
        "FLUXGATE_ES_ELASTICSEARCH__CA_CERTS": str(settings.pki_dir / "ca.crt"),
    }
    console = elasticsearch_env("FLUXGATE_CONSOLE", "elasticsearch__", "console", settings)
    assert console["FLUXGATE_CONSOLE_ELASTICSEARCH__USERNAME"] == "fluxgate-console"
    with pytest.raises(StackError, match="no Elasticsearch role 'spark'"):
        elasticsearch_user("spark", settings)


def test_probing_a_node_never_started_makes_no_password(settings: StackSettings) -> None:
    """``fluxgate-stack status`` probes every server, started or not."""
    assert not ElasticsearchSecuredServer(settings).probe()
    assert not credentials_dir(settings).exists()


def test_an_account_never_shows_its_password(settings: StackSettings) -> None:
    account = ensure_credentials(settings)["es-persister"]
    assert account.password not in repr(account) and account.password_hash not in repr(account)


def test_the_same_settings_reuse_the_node_and_a_new_password_restarts_it(settings: StackSettings) -> None:
    """``up`` reuses a node whose fingerprint is unchanged: the passwords, made once, keep it so;
    one made anew (its file deleted) must reach the node's users file, so it restarts it."""
    first = ElasticsearchSecuredServer(settings).fingerprint()
    assert ElasticsearchSecuredServer(settings).fingerprint() == first
    (credentials_dir(settings) / "fluxgate-console.password").unlink()
    assert ElasticsearchSecuredServer(settings).fingerprint() != first
