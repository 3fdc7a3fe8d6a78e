"""The page in a real browser: Debian's headless Chromium, driven by Selenium through Debian's
chromedriver. It waits for live data, checks the stages, a dead letter with its reason and a
replay round trip, and keeps a screenshot in .local/artifacts/console.png (ignored by git)."""

from __future__ import annotations

import json
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from console_process import console_env
from console_recorded import NOT_READY, READY, metrics_text
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic
from fluxgate_testing.browser import chromium, click_when_ready, screenshot

from fluxgate_core.deadletter import dead_letter_headers

# No skip without Chromium: `make install` gets Debian's chromium and chromium-driver.
pytestmark = [pytest.mark.integration]


@pytest.fixture
def fake_services() -> Iterator[dict[str, int]]:
    """Services answering from recorded texts: a ready aggregator, an es-persister whose store is down."""
    answers = {"aggregator": (200, READY, "aggregator"), "es-persister": (503, NOT_READY, "es-persister-store-down")}
    servers = {}
    for name, (status, ready, recorded) in answers.items():

        class Handler(BaseHTTPRequestHandler):
            reply = (status, ready, metrics_text(recorded))

            def do_GET(self) -> None:
                code, body = (self.reply[0], self.reply[1]) if self.path == "/readyz" else (200, self.reply[2])
                self.send_response(code)
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: object) -> None: ...

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    yield {name: int(server.server_address[1]) for name, server in servers.items()}
    for server in servers.values():
        server.shutdown()


def test_the_page_live_with_a_dead_letter_and_a_replay(
    stack: Any, fake_services: dict[str, int], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    readings = unique_topic("console.readings", stack.bootstrap)
    aggregated = unique_topic("console.aggregated", stack.bootstrap)
    dead = unique_topic("console.deadletter", stack.bootstrap)
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    producer.produce(dead, b"\x00\x00\x00\x00\x2a\x0cdev-3", b"dev-3", headers=dead_letter_headers(
        reason="unknown schema id 42: not registered when the job started", error_class="SerializationError",
        source=f"{readings}/1/17", service="aggregator",
    ))  # fmt: skip
    assert producer.flush(10) == 0
    services = [
        {"name": "mqtt-proxy", "urls": [f"http://127.0.0.1:{free_port()}"], "role": "gateway", "outputs": [readings]},
        {"name": "aggregator", "urls": [f"http://127.0.0.1:{fake_services['aggregator']}"], "role": "processor",
         "group": f"g-{uuid.uuid4().hex[:6]}", "inputs": [readings], "outputs": [aggregated, dead]},
        {"name": "es-persister", "urls": [f"http://127.0.0.1:{fake_services['es-persister']}"], "role": "persister",
         "group": f"g-{uuid.uuid4().hex[:6]}", "inputs": [aggregated], "store": "elasticsearch"},
    ]  # fmt: skip
    web, health = free_port(), free_port()
    console = ServiceProcess(
        [sys.executable, "-m", "fluxgate_console"],
        console_env(
            stack, web, health, dead, readings, PAGE_AUTH__MODE="none", REPLAY_AUTH__MODE="basic",
            REPLAY_AUTH__USERNAME="ops", REPLAY_AUTH__PASSWORD="replay-secret", SERVICES=json.dumps(services),
        ),
        health_port=health, log_path=tmp_path / "console.log", isolate_prefix="FLUXGATE_CONSOLE_",
    ).start(timeout=60)  # fmt: skip
    try:
        with chromium() as browser:
            browser.get(f"http://127.0.0.1:{web}/")
            wait = WebDriverWait(browser, 30)
            row = wait.until(
                expected_conditions.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-letter^="{dead}"]'))
            )
            assert "unknown schema id 42" in row.text and f"→ {readings}" in row.text
            # the letter in its minute, by reason and by service (read in one go: the parts refresh every second)
            bars = browser.execute_script(
                "return ['reason', 'service'].map(by => document.querySelectorAll("
                "`[data-dlq='${arguments[0]}'] table[data-by=${by}] tr[data-key] svg.spark rect`).length)",
                dead,
            )
            assert bars == [1, 1]
            # Read in one go too: an element found before a refresh is stale after it.
            stages, summary = browser.execute_script(
                "return [Object.fromEntries([...document.querySelectorAll('.stage')]"
                ".map(e => [e.dataset.service, e.className])), document.getElementById('summary').innerText]"
            )
            assert stages == {"mqtt-proxy": "stage down", "aggregator": "stage ready", "es-persister": "stage degraded"}
            assert "mqtt-proxy" in summary and "Connection refused" in summary
            browser.find_element(By.ID, "replay-user").send_keys("ops")
            browser.find_element(By.ID, "replay-password").send_keys("replay-secret")
            click_when_ready(wait, By.CSS_SELECTOR, "input.pick")  # the parts refresh every second
            click_when_ready(wait, By.ID, "replay-selected")
            wait.until(expected_conditions.alert_is_present()).accept()
            wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "replay-result"), "sent 1"))
            screenshot(browser, "console.png")
            # A console that no longer answers: the click says so instead of doing nothing.
            click_when_ready(wait, By.CSS_SELECTOR, "input.pick")
            console.terminate()
            browser.find_element(By.ID, "replay-selected").click()
            wait.until(expected_conditions.text_to_be_present_in_element((By.ID, "replay-result"), "did not answer"))
            assert "the console did not answer the replay: " in browser.find_element(By.ID, "replay-result").text
    finally:
        console.terminate()
    (back,) = consume(stack.bootstrap, readings, expected=1, timeout=15)
    assert back.key == b"dev-3" and back.value == b"\x00\x00\x00\x00\x2a\x0cdev-3"
