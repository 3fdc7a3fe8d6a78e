"""Each store's TLS and credentials, from the console's environment to its client's options:
the Elasticsearch HTTP client's CA and auth, cassandra-driver's ssl_context and auth provider,
the Hazelcast client's ssl_* and creds_* options. A bad combination stops the console at start."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest
from console_recorded import refused

from fluxgate_console.app import main
from fluxgate_console.settings import ConsoleSettings, ScyllaStoreSettings
from fluxgate_console.store_clients import elasticsearch_options, hazelcast_options, scylla_options
from fluxgate_console.stores import elasticsearch
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings

INDICES = [{"index": "temperatures-2026.11.25", "docs.count": "3"}]
HIT = {"hits": {"hits": [{"_source": {"device_id": "d1", "window_start": "2026-11-25T10:00:00Z"}}]}}


def console_from(monkeypatch: pytest.MonkeyPatch, **env: str) -> ConsoleSettings:
    for name, value in env.items():
        monkeypatch.setenv(f"FLUXGATE_CONSOLE_{name}", value)
    return load_settings(ConsoleSettings)


class RecordedElasticsearch:
    """Answers as one node does; remembers each request's host and Authorization header."""

    def __init__(self, down: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.down, self.asked = down, []  # type: list[tuple[str, str | None]]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host in self.down:
            raise refused(request)
        self.asked.append((request.url.host, request.headers.get("authorization")))
        return httpx.Response(200, json=INDICES if "_cat" in request.url.path else HIT)


async def ask(options: dict[str, Any], hosts: list[str], node: RecordedElasticsearch) -> Any:
    async with httpx.AsyncClient(**options, transport=httpx.MockTransport(node)) as client:
        return await elasticsearch(client, hosts, "temperatures")


async def test_elasticsearch_basic_auth_reaches_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    es = console_from(monkeypatch, ELASTICSEARCH__USERNAME="elastic", ELASTICSEARCH__PASSWORD="s3cret").elasticsearch
    node = RecordedElasticsearch()
    view = await ask(elasticsearch_options(es, 2.0), ["https://es:9200"], node)
    basic = "Basic " + base64.b64encode(b"elastic:s3cret").decode()
    assert view.error is None and view.total == 3
    assert node.asked == [("es", basic), ("es", basic)]


async def test_elasticsearch_api_key_is_sent_as_the_persister_sends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    es = console_from(monkeypatch, ELASTICSEARCH__API_KEY="aWQ6a2V5").elasticsearch
    node = RecordedElasticsearch()
    await ask(elasticsearch_options(es, 2.0), ["https://es:9200"], node)
    assert {header for _, header in node.asked} == {"ApiKey aWQ6a2V5"}


async def test_elasticsearch_hosts_are_asked_in_order_until_one_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    es = console_from(monkeypatch, ELASTICSEARCH__HOSTS='["http://es-0:9200", "http://es-1:9200"]').elasticsearch
    node = RecordedElasticsearch(down={"es-0"})
    view = await ask(elasticsearch_options(es, 2.0), es.hosts, node)
    assert view.error is None and [host for host, _ in node.asked] == ["es-1", "es-1"]
    node.down = {"es-0", "es-1"}
    assert (await ask({}, es.hosts, node)).error.startswith("ConnectError")


def test_elasticsearch_tls_verifies_with_the_given_ca_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    es = console_from(monkeypatch, ELASTICSEARCH__CA_CERTS=certifi.where()).elasticsearch
    context = elasticsearch_options(es, 2.0)["verify"]
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert len(context.get_ca_certs()) > 10, "the CA file's certificates are loaded"
    unverified = console_from(monkeypatch, ELASTICSEARCH__VERIFY_CERTS="false").elasticsearch
    context = elasticsearch_options(unverified, 2.0)["verify"]
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


def test_a_missing_elasticsearch_ca_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    es = console_from(monkeypatch, ELASTICSEARCH__CA_CERTS="/nowhere/ca.crt").elasticsearch
    with pytest.raises(ConfigError, match=r"\[env FLUXGATE_CONSOLE_ELASTICSEARCH__CA_CERTS\]: \[Errno 2\]"):
        elasticsearch_options(es, 2.0)


def test_scylla_tls_and_credentials_reach_the_cluster_options(monkeypatch: pytest.MonkeyPatch) -> None:
    scylla = console_from(
        monkeypatch, SCYLLA__USERNAME="ops", SCYLLA__PASSWORD="pw",
        SCYLLA__TLS_CA_FILE=certifi.where(), SCYLLA__TLS_CHECK_HOSTNAME="false",
    ).scylla  # fmt: skip
    options = scylla_options(scylla)
    authenticator = options["auth_provider"].new_authenticator("127.0.0.1")
    assert (authenticator.username, authenticator.password) == ("ops", "pw")
    context = options["ssl_context"]
    assert context.verify_mode == ssl.CERT_REQUIRED and not context.check_hostname and context.get_ca_certs()
    assert "ssl_context" not in scylla_options(ScyllaStoreSettings()), "plain without TLS settings"


def test_scylla_password_file_is_read_at_each_new_connection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("first\n")
    scylla = console_from(monkeypatch, SCYLLA__USERNAME="console", SCYLLA__PASSWORD_FILE=str(secret)).scylla
    provider = scylla_options(scylla)["auth_provider"]
    assert provider.new_authenticator("h").password == "first"
    secret.write_text("rotated\n")
    assert provider.new_authenticator("h").password == "rotated"


def test_a_missing_scylla_ca_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    scylla = console_from(monkeypatch, SCYLLA__TLS_CA_FILE="/nowhere/ca.crt").scylla
    with pytest.raises(ConfigError, match=r"\[env FLUXGATE_CONSOLE_SCYLLA__TLS_CA_FILE\]: cannot read /nowhere/ca.crt"):
        scylla_options(scylla)


def test_hazelcast_tls_and_credentials_reach_the_client_options(monkeypatch: pytest.MonkeyPatch) -> None:
    hazelcast = console_from(
        monkeypatch, HAZELCAST__USERNAME="ops", HAZELCAST__PASSWORD="pw", HAZELCAST__SSL_ENABLED="true",
        HAZELCAST__SSL_CAFILE="/etc/hz/ca.pem", HAZELCAST__SSL_CERTFILE="/etc/hz/client.pem",
        HAZELCAST__SSL_KEYFILE="/etc/hz/client.key", HAZELCAST__SSL_PASSWORD="kp",
    ).hazelcast  # fmt: skip
    options = hazelcast_options(hazelcast, 2.0)
    assert options | {"cluster_members": None} == {
        "cluster_members": None, "cluster_name": "fluxgate", "cluster_connect_timeout": 2.0,
        "invocation_timeout": 2.0, "creds_username": "ops", "creds_password": "pw", "ssl_enabled": True,
        "ssl_cafile": "/etc/hz/ca.pem", "ssl_certfile": "/etc/hz/client.pem", "ssl_keyfile": "/etc/hz/client.key",
        "ssl_password": "kp",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"ELASTICSEARCH__API_KEY": "k", "ELASTICSEARCH__USERNAME": "u", "ELASTICSEARCH__PASSWORD": "p"},
         "[env FLUXGATE_CONSOLE_ELASTICSEARCH]: Value error, api_key and username/password are exclusive"),
        ({"SCYLLA__TLS_CHECK_HOSTNAME": "false"},
         "[env FLUXGATE_CONSOLE_SCYLLA]: Value error, tls_check_hostname=false needs tls"),
        ({"HAZELCAST__SSL_CAFILE": "/ca.pem"},
         "[env FLUXGATE_CONSOLE_HAZELCAST]: Value error, ssl_cafile set but ssl_enabled is false"),
        ({"ELASTICSEARCH__HOSTS": json.dumps("http://es:9200")}, "[env FLUXGATE_CONSOLE_ELASTICSEARCH__HOSTS]"),
    ],
)  # fmt: skip
def test_a_bad_store_setting_stops_the_console_at_start_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str], said: str
) -> None:
    console_from(monkeypatch, PAGE_AUTH__MODE="none", REPLAY_AUTH__MODE="none")
    for name, value in env.items():
        monkeypatch.setenv(f"FLUXGATE_CONSOLE_{name}", value)
    with pytest.raises(SystemExit) as stopped:
        main()
    assert stopped.value.code == 2 and said in capsys.readouterr().err
