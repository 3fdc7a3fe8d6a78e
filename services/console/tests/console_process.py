"""What the console's integration tests share: waiting, the console as a process, an aggregate."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
from fluxgate_testing import ServiceProcess, unique_topic


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"not within {timeout}s: {what}")


class Console:
    def __init__(self, process: ServiceProcess, port: int) -> None:
        self.process, self.url = process, f"http://127.0.0.1:{port}"

    def get(self, path: str, **params: str) -> Any:
        return httpx.get(self.url + path, params=params, timeout=5).json()

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """As the page's own script posts: from the console's origin, with the page's CSRF token."""
        page = httpx.get(self.url + "/", timeout=5).text
        found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
        assert found, "the page carries its CSRF token"
        headers = {"Origin": self.url, "X-CSRF-Token": found.group(1)}
        return httpx.post(self.url + path, json=body, headers=headers, timeout=60)

    def letters(self, **params: str) -> list[dict[str, Any]]:
        return list(self.get("/api/deadletters", **params))

    def service(self, name: str) -> dict[str, Any]:
        return next(s for s in self.get("/api/state")["services"] if s["name"] == name)


def console_env(stack: Any, web: int, health: int, dead: str, readings: str, **more: str) -> dict[str, str]:
    """A console's env for the browser tests: its ports on loopback, reading ``dead`` and
    replaying only into ``readings``, asking no store; ``more`` (unprefixed) adds or wins."""
    env = {
        "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, "REGISTRY__URL": stack.registry_url,
        "HTTP__HOST": "127.0.0.1", "HTTP__PORT": str(health), "WEB__HOST": "127.0.0.1", "WEB__PORT": str(web),
        "DEADLETTERS__TOPICS": json.dumps([dead]), "REPLAY__TARGETS": json.dumps({dead: [readings]}),
        "REPLAY__AUDIT_TOPIC": unique_topic("console.replays", stack.bootstrap, partitions=1),
        "REPLAY__TRANSACTIONAL_ID": f"console-browser-{uuid.uuid4().hex[:8]}", "REFRESH_S": "1",
        "ELASTICSEARCH__HOSTS": "[]", "SCYLLA__CONTACT_POINTS": "[]", "HAZELCAST__MEMBERS": "[]",
        **more,
    }  # fmt: skip
    return {f"FLUXGATE_CONSOLE_{name}": value for name, value in env.items()}


def aggregate(device: str, start: datetime) -> dict[str, Any]:
    return {
        "device_id": device, "metric": "temperature", "window_start": start,
        "window_end": start + timedelta(minutes=1), "count": 2, "min": 20.0, "max": 22.0, "mean": 21.0,
        "stddev": 1.0, "first_event_time": start, "last_event_time": start + timedelta(seconds=50), "unit": None,
    }  # fmt: skip
