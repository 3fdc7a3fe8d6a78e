"""Cross-site requests, the two roles and the security headers (issue 35), through the app as
the browser reaches it: an Origin (or Referer) of the console's own and a CSRF token are needed
for anything that changes state; a viewer may look, only an operator may replay."""

from __future__ import annotations

import re
from typing import Any

import pytest
from console_recorded import NO_STORES, TEST_HOST, RecordedKafka, Services
from console_web import basic, csrf_token, web_for

from fluxgate_console.security import host_name
from fluxgate_console.settings import ConsoleSettings

SAME_ORIGIN = {"Origin": "http://testserver"}
ASKED = {"filter": {"reason": "schema"}, "confirm": True}


@pytest.fixture
def roles() -> ConsoleSettings:
    return ConsoleSettings.model_validate(
        {
            "page_auth": {"mode": "basic", "username": "viewer", "password": "look-secret"},
            "replay_auth": {"mode": "basic", "username": "operator", "password": "replay-secret"},
            **NO_STORES,
            **TEST_HOST,
        }
    )


async def test_a_post_from_another_origin_is_refused_even_with_a_token(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, replayer = await web_for(settings, kafka, services)
    token = {"X-CSRF-Token": csrf_token(client)}
    refused = [
        client.post("/api/replay", json=ASKED, headers={**token, "Origin": "http://127.0.0.1:8666"}),
        client.post("/api/replay", json=ASKED, headers={**token, "Origin": "null"}),
        client.post("/api/replay", json=ASKED, headers={**token, "Referer": "http://evil.example/replay.html"}),
        client.post("/api/replay", json=ASKED, headers=token),  # neither Origin nor Referer
    ]
    assert [r.status_code for r in refused] == [403] * 4, [r.text for r in refused]
    assert "origin" in refused[0].json()["message"]
    assert replayer.replayed == []


async def test_a_post_without_the_pages_token_is_refused(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, replayer = await web_for(settings, kafka, services)
    token = csrf_token(client)
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    missing = client.post("/api/replay", json=ASKED, headers=SAME_ORIGIN)
    wrong = client.post("/api/replay", json=ASKED, headers={**SAME_ORIGIN, "X-CSRF-Token": forged})
    assert (missing.status_code, wrong.status_code) == (403, 403) and "token" in missing.json()["message"]
    # a form can post JSON-looking text/plain across sites: only application/json is read
    form = client.post("/api/replay", content=b'{"filter": {"reason": "schema"}, "confirm": true}',
                       headers={**SAME_ORIGIN, "X-CSRF-Token": token, "Content-Type": "text/plain"})  # fmt: skip
    assert form.status_code == 415 and replayer.replayed == []
    same = client.post("/api/replay", json=ASKED, headers={**SAME_ORIGIN, "X-CSRF-Token": token})
    assert same.status_code == 200 and replayer.replayed == [(["sensors.deadletter/1/2"], "anonymous")]


async def test_the_referer_stands_in_for_a_missing_origin(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(settings, kafka, services)
    headers = {"Referer": "http://testserver/?topic=sensors.deadletter", "X-CSRF-Token": csrf_token(client)}
    assert client.post("/api/replay", json=ASKED, headers=headers).status_code == 200


async def test_a_viewer_may_look_and_gets_403_on_replay(
    roles: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, replayer = await web_for(roles, kafka, services)
    viewer, operator = basic("viewer", "look-secret"), basic("operator", "replay-secret")
    headers = {**SAME_ORIGIN, "X-CSRF-Token": csrf_token(client, **viewer)}
    assert client.get("/api/state", headers=viewer).status_code == 200
    as_viewer = client.post("/api/replay", json=ASKED, headers={**headers, **viewer})
    assert as_viewer.status_code == 403 and "viewer" in as_viewer.json()["message"]
    assert client.post("/api/replay", json=ASKED, headers=headers).status_code == 401
    assert client.post("/api/replay", json=ASKED, headers={**headers, **basic("operator", "no")}).status_code == 401
    assert replayer.replayed == []
    assert client.get("/api/state", headers=operator).status_code == 200, "an operator may look too"
    assert client.post("/api/replay", json=ASKED, headers={**headers, **operator}).status_code == 200
    assert replayer.replayed == [(["sensors.deadletter/1/2"], "operator")]


async def test_replay_open_to_every_viewer_only_when_said(kafka: RecordedKafka, services: Services) -> None:
    """replay_auth none: the operator is whoever may look, never someone the page refuses."""
    settings = ConsoleSettings.model_validate(
        {"page_auth": {"mode": "bearer", "token": "look"}, "replay_auth": {"mode": "none"}, **NO_STORES, **TEST_HOST}
    )
    client, _ = await web_for(settings, kafka, services)
    viewer = {"Authorization": "Bearer look"}
    headers = {**SAME_ORIGIN, "X-CSRF-Token": csrf_token(client, **viewer)}
    assert client.post("/api/replay", json=ASKED, headers=headers).status_code == 401
    assert client.post("/api/replay", json=ASKED, headers={**headers, **viewer}).status_code == 200


def security_headers(response: Any) -> dict[str, str]:
    names = ("content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy")
    return {name: response.headers.get(name, "") for name in names}


async def test_every_response_carries_the_security_headers(
    roles: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(roles, kafka, services)
    viewer = basic("viewer", "look-secret")
    answers = [client.get("/", headers=viewer), client.get("/api/state", headers=viewer), client.get("/"),
               client.get("/connect/connectors/nope", headers=viewer), client.post("/api/replay", json={}),
               client.get("/no-such-page", headers=viewer)]  # fmt: skip
    for answer in answers:
        headers = security_headers(answer)
        assert "frame-ancestors 'none'" in headers["content-security-policy"], answer.url
        assert (headers["x-frame-options"], headers["x-content-type-options"]) == ("DENY", "nosniff")
        assert headers["referrer-policy"] == "same-origin"
        assert "unsafe-inline" not in headers["content-security-policy"]


async def test_the_page_runs_only_its_own_nonced_script(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    client, _ = await web_for(settings, kafka, services)
    first, second = client.get("/"), client.get("/")
    (nonce,) = re.findall(r"script-src 'nonce-([^']+)'", first.headers["content-security-policy"])
    assert nonce not in second.headers["content-security-policy"], "a nonce per response"
    page = first.text
    assert re.findall(r"<script[^>]*>", page) == [f'<script nonce="{nonce}">']
    assert re.findall(r"<style[^>]*>", page) == [f'<style nonce="{nonce}">']
    assert not re.findall(r"\son[a-z]+=", page), "no inline event handler (CSP would block it)"
    assert not re.findall(r'\sstyle="', page), "no style attribute (CSP would block it)"


async def test_a_host_the_console_is_not_known_by_is_refused(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    """DNS rebinding: a page of evil.example, its name made to resolve to the console's address,
    is its own origin; its Host gives it away."""
    client, replayer = await web_for(settings, kafka, services)
    rebound = {"Host": "evil.example:9108", "Origin": "http://evil.example:9108"}
    looked = client.get("/", headers=rebound)
    assert looked.status_code == 400 and "web.allowed_hosts" in looked.json()["message"]
    token = csrf_token(client)
    posted = client.post("/api/replay", json=ASKED, headers={**rebound, "X-CSRF-Token": token})
    assert posted.status_code == 400 and replayer.replayed == []
    assert security_headers(posted)["x-frame-options"] == "DENY"


@pytest.mark.parametrize(
    ("host", "name"), [("127.0.0.1:9108", "127.0.0.1"), ("[::1]:9108", "[::1]"), ("Console", "console"), ("", "")]
)
def test_host_names_without_their_port(host: str, name: str) -> None:
    assert host_name(host) == name
