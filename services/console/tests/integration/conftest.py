"""The console as a process against the real stack: the fixture starting it."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from console_process import Console
from fluxgate_testing import ServiceProcess, free_port

# A console's start (60 s at most), its first answers (30 s) and 30 s of slack. The wait for a
# midnight, at most DAY_HELD_S + DAY_BEGUN_S, and the test together stay under pytest's 300 s.
DAY_HELD_S = 120
DAY_BEGUN_S = 10  # rows of "today" are written up to 5 s before the test's instant


@pytest.fixture
def now() -> datetime:
    """The instant a test writes its rows around (UTC, whole seconds), at least ``DAY_BEGUN_S``
    into its day and ``DAY_HELD_S`` before its end: the console names the days it counts from
    its own clock, so a test whose rows are of "today" must neither start in yesterday nor
    cross into tomorrow. Near midnight it waits the boundary out."""
    current = datetime.now(UTC)
    into_day = current - datetime.combine(current.date(), datetime.min.time(), UTC)
    if into_day > timedelta(days=1, seconds=-DAY_HELD_S):
        time.sleep((timedelta(days=1, seconds=DAY_BEGUN_S) - into_day).total_seconds())
    elif into_day < timedelta(seconds=DAY_BEGUN_S):
        time.sleep((timedelta(seconds=DAY_BEGUN_S) - into_day).total_seconds())
    return datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def console(stack: Any, tmp_path: Path) -> Iterator[Callable[..., Console]]:
    started: list[ServiceProcess] = []

    def start(services: list[dict[str, Any]], deadletters: list[str], audit: str, **stores: str) -> Console:
        """A console watching ``services``; it asks no store but those ``stores`` (its env, unprefixed) name."""
        web, health = free_port(), free_port()
        env = {
            "FLUXGATE_CONSOLE_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
            "FLUXGATE_CONSOLE_REGISTRY__URL": stack.registry_url,
            "FLUXGATE_CONSOLE_HTTP__HOST": "127.0.0.1", "FLUXGATE_CONSOLE_HTTP__PORT": str(health),
            "FLUXGATE_CONSOLE_WEB__HOST": "127.0.0.1", "FLUXGATE_CONSOLE_WEB__PORT": str(web),
            "FLUXGATE_CONSOLE_PAGE_AUTH__MODE": "none", "FLUXGATE_CONSOLE_REPLAY_AUTH__MODE": "none",
            "FLUXGATE_CONSOLE_SERVICES": json.dumps(services),
            "FLUXGATE_CONSOLE_DEADLETTERS__TOPICS": json.dumps(deadletters),
            "FLUXGATE_CONSOLE_REPLAY__AUDIT_TOPIC": audit,
            "FLUXGATE_CONSOLE_REPLAY__TARGETS": "{}",  # the pipeline's dead-letter topics are not read here
            "FLUXGATE_CONSOLE_REPLAY__TRANSACTIONAL_ID": f"console-test-{uuid.uuid4().hex[:8]}",
            "FLUXGATE_CONSOLE_REFRESH_S": "1", "FLUXGATE_CONSOLE_RATE_WINDOW_S": "10",
            "FLUXGATE_CONSOLE_ELASTICSEARCH__HOSTS": "[]",
            "FLUXGATE_CONSOLE_SCYLLA__CONTACT_POINTS": "[]", "FLUXGATE_CONSOLE_HAZELCAST__MEMBERS": "[]",
            **{f"FLUXGATE_CONSOLE_{name}": value for name, value in stores.items()},
        }  # fmt: skip
        process = ServiceProcess(
            [sys.executable, "-m", "fluxgate_console"], env, health_port=health,
            log_path=tmp_path / f"console-{len(started)}.log", isolate_prefix="FLUXGATE_CONSOLE_",
        )  # fmt: skip
        started.append(process.start(timeout=60))
        return Console(process, web)

    yield start
    exits = [process.terminate() for process in started]
    assert exits == [0] * len(started), [p.log_tail() for p in started]  # a clean stop on SIGTERM
