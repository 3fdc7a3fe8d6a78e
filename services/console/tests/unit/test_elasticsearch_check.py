"""The console's start-up question to Elasticsearch: a refused login or an untrusted certificate
stops it (exit 2 naming the settings), Elasticsearch away does not (the page shows that)."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import httpx
import pytest
from console_recorded import refused

from fluxgate_console.settings import ConsoleSettings
from fluxgate_console.store_clients import check_elasticsearch, elasticsearch_options
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings

REFUSAL = {"error": {"reason": "unable to authenticate user [console] for REST request [/_cat/indices]"}, "status": 401}


def settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> ConsoleSettings:
    monkeypatch.setenv("FLUXGATE_CONSOLE_ELASTICSEARCH__HOSTS", '["https://es:9200"]')
    for name, value in env.items():
        monkeypatch.setenv(f"FLUXGATE_CONSOLE_{name}", value)
    return load_settings(ConsoleSettings)


async def check(es: ConsoleSettings, answer: httpx.MockTransport) -> None:
    async with httpx.AsyncClient(transport=answer, **elasticsearch_options(es.elasticsearch, 2.0)) as client:
        await check_elasticsearch(client, es.elasticsearch)


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "console.password"
    path.write_text("read-only-secret\n")
    return path


async def test_the_password_file_is_what_the_console_sends(
    monkeypatch: pytest.MonkeyPatch, password_file: Path
) -> None:
    es = settings(monkeypatch, ELASTICSEARCH__USERNAME="console", ELASTICSEARCH__PASSWORD_FILE=str(password_file))
    sent: list[str | None] = []

    def node(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers.get("authorization"))
        return httpx.Response(200, json=[])

    await check(es, httpx.MockTransport(node))
    assert sent == ["Basic " + base64.b64encode(b"console:read-only-secret").decode()]


async def test_a_refused_login_names_the_credential_variables(
    monkeypatch: pytest.MonkeyPatch, password_file: Path
) -> None:
    es = settings(monkeypatch, ELASTICSEARCH__USERNAME="console", ELASTICSEARCH__PASSWORD_FILE=str(password_file))
    with pytest.raises(ConfigError) as refused:
        await check(es, httpx.MockTransport(lambda request: httpx.Response(401, json=REFUSAL)))
    said = str(refused.value)
    assert "[env FLUXGATE_CONSOLE_ELASTICSEARCH__USERNAME, FLUXGATE_CONSOLE_ELASTICSEARCH__PASSWORD_FILE]" in said
    assert "refused the login of 'console'" in said and "unable to authenticate user [console]" in said
    assert "read-only-secret" not in said


async def test_an_untrusted_certificate_names_ca_certs(monkeypatch: pytest.MonkeyPatch) -> None:
    def node(request: httpx.Request) -> httpx.Response:
        try:
            raise ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
        except ssl.SSLError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc

    with pytest.raises(ConfigError, match=r"\[env FLUXGATE_CONSOLE_ELASTICSEARCH__CA_CERTS\]: the TLS handshake"):
        await check(settings(monkeypatch), httpx.MockTransport(node))


async def test_elasticsearch_away_or_forbidding_is_left_to_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    def away(request: httpx.Request) -> httpx.Response:
        raise refused(request)

    await check(settings(monkeypatch), httpx.MockTransport(away))
    await check(settings(monkeypatch), httpx.MockTransport(lambda request: httpx.Response(404, json={})))
    monkeypatch.setenv("FLUXGATE_CONSOLE_ELASTICSEARCH__HOSTS", "[]")
    await check(load_settings(ConsoleSettings), httpx.MockTransport(away))  # not shown: not asked
