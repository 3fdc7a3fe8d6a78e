"""Issue 35: another site cannot replay through an operator's browser. A page served from
another origin (another port on loopback) auto-submits a form, and runs a fetch, to the
console's replay endpoint, in Debian's headless Chromium. The console is set up as `make run`
and compose have it (no auth): the worst case, where nothing but the cross-site checks stands
in the way. The console refuses both, and nothing reaches the target topic."""

from __future__ import annotations

import html
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from console_process import Console, console_env, wait_for
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic
from fluxgate_testing.browser import chromium

from fluxgate_core.deadletter import dead_letter_headers

pytestmark = [pytest.mark.integration]

# Replay everything matching, confirmed: what a forged request would ask for.
ASKED = {"filter": {"reason": "schema id 42"}, "confirm": True}


def attacker_pages(replay_url: str) -> dict[str, str]:
    """The attacker's pages. A text/plain form can post a body that is valid JSON: the field's
    name carries the JSON, its value closes the last string (``name=value``)."""
    opening = json.dumps({**ASKED, "pad": ""})[:-2]  # ... "pad": "
    form = (
        f'<form id="f" method="POST" action="{html.escape(replay_url)}" enctype="text/plain">'
        f'<input type="hidden" name="{html.escape(opening)}" value="&quot;}}"></form>'
        "<script>document.getElementById('f').submit();</script>"
    )
    fetch = (
        "<script>fetch(" + json.dumps(replay_url) + ", {method: 'POST', mode: 'no-cors', credentials: 'include',"
        " headers: {'Content-Type': 'text/plain'}, body: " + json.dumps(json.dumps(ASKED)) + "})"
        ".then(() => document.title = 'sent', e => document.title = 'failed: ' + e);</script>"
    )
    return {"/form.html": form, "/fetch.html": fetch}


@pytest.fixture
def attacker() -> Iterator[tuple[int, dict[str, str]]]:
    """Another origin on loopback serving whatever pages the test puts in the dict it yields."""
    pages: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None: ...

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1]), pages
    server.shutdown()


def test_a_form_and_a_fetch_from_another_site_replay_nothing(
    stack: Any, attacker: tuple[int, dict[str, str]], tmp_path: Path
) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    readings = unique_topic("console.readings", stack.bootstrap)
    dead = unique_topic("console.deadletter", stack.bootstrap)
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    producer.produce(dead, b"\x00\x00\x00\x00\x2a\x0cdev-3", b"dev-3", headers=dead_letter_headers(
        reason="unknown schema id 42: not registered when the job started", error_class="SerializationError",
        source=f"{readings}/1/17", service="aggregator",
    ))  # fmt: skip
    assert producer.flush(10) == 0
    web, health = free_port(), free_port()
    env = console_env(stack, web, health, dead, readings, PAGE_AUTH__MODE="none", REPLAY_AUTH__MODE="none")
    process = ServiceProcess(
        [sys.executable, "-m", "fluxgate_console"], env, health_port=health, log_path=tmp_path / "console.log",
        isolate_prefix="FLUXGATE_CONSOLE_",
    ).start(timeout=60)  # fmt: skip
    console = Console(process, web)
    port, pages = attacker
    pages.update(attacker_pages(f"{console.url}/api/replay"))
    try:
        wait_for(lambda: console.letters(reason="schema id 42"), 30, "the dead letter on the console")
        with chromium() as browser:
            wait = WebDriverWait(browser, 20)
            browser.get(f"http://127.0.0.1:{port}/form.html")  # the form takes the window to the answer
            wait.until(lambda b: b.current_url.startswith(console.url))
            answer = json.loads(browser.find_element("tag name", "body").text)
            assert answer["error_code"] == 403 and f"origin http://127.0.0.1:{port}" in answer["message"]
            browser.get(f"http://127.0.0.1:{port}/fetch.html")
            wait.until(lambda b: b.title == "sent")  # an opaque answer: what counts is that nothing came
        plan = console.post("/api/replay", {**ASKED, "confirm": False}).json()  # from the console's own page
        assert [x["target"] for x in plan["send"]] == [readings], "replayable: only the cross-site checks refused"
    finally:
        process.terminate()
    assert consume(stack.bootstrap, readings, timeout=5) == [], "nothing was replayed"
