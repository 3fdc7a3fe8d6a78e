"""The shared sink suite (fluxgate_testing.sink.suite) against a real Hazelcast member.

The suite's checks (the same batch twice is one entry per id, a replay rebuilds an
identical store) are those of an idempotent store, so the adapter writes an IMap keyed by
the PK values. The appending structures have their own tests (test_sink.py, test_process.py).
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from fluxgate_testing.sink.store import StoreUnderTest
from fluxgate_testing.sink.suite import SinkSuite
from hazelcast import HazelcastClient


class HazelcastUnderTest(StoreUnderTest):
    """One IMap per target; entries read back as JSON."""

    argv = (str(Path(sys.executable).with_name("fluxgate-hazelcast-persister")),)
    env_prefix = "FLUXGATE_HZ_"
    durable = False  # a member without persistence (an Enterprise feature) restarts empty

    def __init__(self, member: Any) -> None:
        self.member = member
        self._client: HazelcastClient | None = None

    @property
    def client(self) -> HazelcastClient:
        if self._client is None or not self._client.lifecycle_service.is_running():
            self._client = HazelcastClient(**self.member.client_options())
        return self._client

    def env(self) -> dict[str, str]:
        # A short invocation timeout: a write to a killed member fails fast into the runner's outage path.
        return {
            **self.member.env(),
            "HAZELCAST__INVOCATION_TIMEOUT_S": "5",
            "HAZELCAST__CONNECT_TIMEOUT_S": "60",
        }

    def new_target(self) -> str:
        return f"suite-{uuid.uuid4().hex[:10]}"

    def kcql(self, topic: str, target: str) -> str:
        return f"INSERT INTO {target} SELECT * FROM {topic} STOREAS IMAP"

    def documents(self, target: str) -> dict[str, dict[str, Any]]:
        entries = self.client.get_map(target).blocking().entry_set()
        return {str(key): json.loads(value.to_string()) for key, value in entries}

    def count(self, target: str) -> int:
        return int(self.client.get_map(target).blocking().size())

    def refused_value(self, value: dict[str, Any]) -> dict[str, Any]:
        # A valid Avro double with no JSON form: the persister refuses that document for good.
        return {**value, "mean": float("nan")}

    def kill(self) -> None:
        self.member.kill()
        if self._client is not None:
            self._client.shutdown()
            self._client = None

    def start(self) -> None:
        self.member.start()

    def drop(self, target: str) -> None:
        with contextlib.suppress(Exception):  # a member a test left down: nothing to clean
            self.client.get_map(target).blocking().destroy()


class TestHazelcastSinkSuite(SinkSuite):
    server = "hazelcast"

    @pytest.fixture
    def store(self, hz_member: Any) -> StoreUnderTest:
        return HazelcastUnderTest(hz_member)
