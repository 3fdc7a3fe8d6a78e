"""What the console's integration tests share: waiting, the console as a process, an aggregate."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
from fluxgate_testing import ServiceProcess


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


def aggregate(device: str, start: datetime) -> dict[str, Any]:
    return {
        "device_id": device, "metric": "temperature", "window_start": start,
        "window_end": start + timedelta(minutes=1), "count": 2, "min": 20.0, "max": 22.0, "mean": 21.0,
        "stddev": 1.0, "first_event_time": start, "last_event_time": start + timedelta(seconds=50), "unit": None,
    }  # fmt: skip
