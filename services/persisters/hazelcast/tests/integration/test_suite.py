"""The shared sink suite (fluxgate_sink.testing.suite) against a real Hazelcast member.

The suite's checks (the same batch twice is one entry per id, a replay rebuilds an
identical store) are those of an idempotent store, so the adapter writes an IMap keyed by
the PK values. The appending structures have their own tests (test_sink.py, test_process.py).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hazelcast import HazelcastClient

from fluxgate_core.serde import AvroDecoder, registry_client
from fluxgate_core.settings import RegistrySettings
from fluxgate_core.testing import consume
from fluxgate_sink.testing.store import StoreUnderTest
from fluxgate_sink.testing.suite import Run, SinkSuite, _trickle, aggregates


class HazelcastUnderTest(StoreUnderTest):
    """One IMap per target; entries read back as JSON."""

    argv = (str(Path(sys.executable).with_name("fluxgate-hazelcast-persister")),)
    env_prefix = "FLUXGATE_HZ_"

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
        # A short Kafka session: a SIGKILLed persister leaves the group in seconds, not 45.
        session = json.dumps({"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"})
        return {
            **self.member.env(),
            "HAZELCAST__INVOCATION_TIMEOUT_S": "5",
            "HAZELCAST__CONNECT_TIMEOUT_S": "60",
            "KAFKA__EXTRA": session,
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
    @pytest.fixture
    def store(self, hz_member: Any) -> StoreUnderTest:
        return HazelcastUnderTest(hz_member)

    @pytest.mark.xfail(
        run=False,  # it would wait 120 s for records that no longer exist
        reason="a SIGKILLed Hazelcast member without persistence (Enterprise) restarts empty: the records "
        "written and committed before the kill are gone, and Kafka rightly never redelivers committed records, "
        "so 'all 1500 in the store' cannot hold; test_the_store_killed_mid_stream_rewrites_what_was_not_committed "
        "asserts what the persister owes instead",
    )
    def test_the_store_killed_mid_stream_loses_and_doubles_nothing(self, run: Run) -> None:
        super().test_the_store_killed_mid_stream_loses_and_doubles_nothing(run)

    def test_the_store_killed_mid_stream_rewrites_what_was_not_committed(self, run: Run) -> None:
        """The suite's store-kill test, with the assertion an in-memory store allows: every record
        not committed when the store went down is in the restarted store, once (and so is
        everything produced afterwards); what was committed before is the store's loss, not ours."""
        values = aggregates(1500)
        process = run.persister(batch_size="50").start()
        producing = threading.Thread(target=_trickle, args=(run, values, 30), daemon=True)
        producing.start()
        run.wait_for(process, 100)
        run.store.kill()
        process.wait_until(lambda: not process.ready(), "/readyz 503 while the store is down", 60)
        assert process.metric("fluxgate_sink_store_up") == 0
        # Writes fail from here on, so nothing commits: a batch written before the kill has been committed by now.
        committed = {partition: run.committed(partition) or 0 for partition in range(3)}
        time.sleep(2)
        run.store.start()
        producing.join(120)
        decoder = AvroDecoder(registry_client(RegistrySettings(url=run.stack.registry_url)))  # type: ignore[call-arg]
        records = consume(run.stack.bootstrap, run.topic, expected=1500, decoder=decoder, idle=0)
        owed = {expected_id(r.record or {}) for r in records if r.offset >= committed[r.partition]}
        assert len(owed) > 1000, "the kill came too late to leave records uncommitted"
        process.wait_until(lambda: owed <= set(run.store.documents(run.target)), "every uncommitted record", 120)
        process.wait_until(process.ready, "/readyz 200 once the store is back")
        assert run.store.count(run.target) == len(run.store.documents(run.target))
        assert process.terminate() == 0


def expected_id(value: dict[str, Any]) -> str:
    return f"{value['device_id']}|{value['metric']}|{int(value['window_start'].timestamp() * 1000)}"
