"""``fluxgate-hazelcast-persister`` as a process: the offset record keeps a SIGKILL from doubling a ringbuffer."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from fluxgate_testing import ServiceProcess, free_port
from fluxgate_testing.sink.suite import Run, aggregates, expected_ids
from hazelcast import HazelcastClient

pytestmark = pytest.mark.integration


class RingbufferTarget:
    """Just enough of a StoreUnderTest for ``Run``: a ringbuffer per target, read by a separate client."""

    argv = (str(Path(sys.executable).with_name("fluxgate-hazelcast-persister")),)
    env_prefix = "FLUXGATE_HZ_"

    def __init__(self, member: Any) -> None:
        self.member = member
        self.client = HazelcastClient(**member.client_options())

    def env(self) -> dict[str, str]:
        # A short session: the second persister gets the killed one's partitions in seconds, not 45.
        session = json.dumps({"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"})
        return {**self.member.env(), "KAFKA__EXTRA": session}

    def new_target(self) -> str:
        return f"ring-{uuid.uuid4().hex[:10]}"

    def kcql(self, topic: str, target: str) -> str:
        return f"INSERT INTO {target} SELECT * FROM {topic} STOREAS RING_BUFFER WITHFORMAT JSON"

    def size(self, target: str) -> int:
        return int(self.client.get_ringbuffer(target).blocking().size())

    def entries(self, target: str) -> list[dict[str, Any]]:
        ringbuffer = self.client.get_ringbuffer(target).blocking()
        size, out = ringbuffer.size(), []
        while len(out) < size:
            out.extend(json.loads(v.to_string()) for v in ringbuffer.read_many(len(out), 1, 500))
        return out

    def documents(self, target: str) -> dict[str, Any]:
        return {f"{e['device_id']}|{e['metric']}|{e['window_start']}": e for e in self.entries(target)}

    def drop(self, target: str) -> None:
        self.client.get_ringbuffer(target).blocking().destroy()


@pytest.fixture
def ring_run(stack: Any, hz_member: Any, registry_client: Any) -> Any:
    store = RingbufferTarget(hz_member)
    run = Run(stack, store, registry_client)
    yield run
    run.close()
    store.client.shutdown()


def test_a_persister_sigkilled_mid_stream_repeats_at_most_one_batch_per_partition(ring_run: Run) -> None:
    """The offset record is written just after the batch's items (a ringbuffer and an IMap share
    no transaction): a kill between the two repeats that batch, never more, and skips nothing."""
    values = aggregates(3000)
    ring_run.produce(values[:2000])
    first = ring_run.persister(batch_size="100").start()
    store: RingbufferTarget = ring_run.store  # type: ignore[assignment]
    first.wait_until(lambda: store.size(ring_run.target) >= 600, "600 entries")
    # Frozen before the last 1000 exist, it is killed with records left to write whatever the
    # machine's speed (a loaded CI run once saw it write all 3000 before the test looked again).
    first.pause()
    ring_run.produce(values[2000:])
    first.kill()
    written = len(store.entries(ring_run.target))
    committed = ring_run.committed_total()
    assert written <= 2000, "it wrote records produced after it was frozen"
    second = ring_run.persister(batch_size="100").start()
    second.wait_until(lambda: second.metric("fluxgate_sink_records_written_total") >= 3000 - committed, "the rest", 60)
    second.wait_until(lambda: ring_run.committed_total() == 3000, "every offset committed")
    entries = store.entries(ring_run.target)
    doubled = len(entries) - 3000
    assert 0 <= doubled <= 3 * 100, f"{doubled} entries doubled (written {written}, committed {committed})"
    assert {f"{e['device_id']}|{e['metric']}|{e['window_start']}" for e in entries} == {
        f"{v['device_id']}|{v['metric']}|{v['window_start'].isoformat()}" for v in values
    }
    assert len(expected_ids(values)) == 3000
    assert second.terminate() == 0


def test_a_bad_setting_exits_2_naming_the_variable(tmp_path: Path) -> None:
    port = free_port()
    process = ServiceProcess(
        [sys.executable, "-m", "fluxgate_hazelcast_persister"],
        {"FLUXGATE_HZ_SINK__KCQL": "INSERT INTO x SELECT * FROM t STOREAS CACHE", "FLUXGATE_HZ_HTTP__PORT": str(port)},
        health_port=port,
        log_path=tmp_path / "bad.log",
        isolate_prefix="FLUXGATE_HZ_",
    )
    process.start(wait_ready=False)
    assert process.wait(30) == 2
    assert "FLUXGATE_HZ_SINK__KCQL" in process.log_text() and "STOREAS CACHE" in process.log_text()


def test_a_wrong_cluster_name_exits_2_at_once_naming_the_variable(hz_member: Any, tmp_path: Path) -> None:
    """The member answers and refuses the name: a setting to fix, said at the first refusal, not
    an outage said after the whole connect timeout (the client only logs the refusal)."""
    port = free_port()
    env = {f"FLUXGATE_HZ_{name}": value for name, value in hz_member.env().items()}
    env |= {"FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME": "not-this-cluster", "FLUXGATE_HZ_HTTP__PORT": str(port)}
    # Long enough that a run which waited for it would not end within the test's wait.
    env["FLUXGATE_HZ_HAZELCAST__CONNECT_TIMEOUT_S"] = "300"
    process = ServiceProcess(
        [sys.executable, "-m", "fluxgate_hazelcast_persister"],
        env,
        health_port=port,
        log_path=tmp_path / "wrong-cluster.log",
        isolate_prefix="FLUXGATE_HZ_",
    )
    process.start(wait_ready=False)
    assert process.wait(60) == 2, process.log_text()[-3000:]
    said = process.log_text()
    assert "hazelcast.cluster_name [env FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME]" in said, said[-3000:]
    assert "refused the cluster name 'not-this-cluster'" in said


def test_a_topic_that_does_not_exist_stops_the_persister_or_is_created_and_its_deletion_unreadies_it(
    ring_run: Run,
) -> None:
    """Issue #37: the KCQL's topic missing exits 2 naming it, SINK__KCQL and the command; with
    KAFKA__TOPIC_CREATION__ENABLE it is created (the partitions asked) and the persister gets ready;
    deleted while it runs, /readyz answers 503."""
    topic = f"test.missing.{uuid.uuid4().hex[:10]}"
    kcql = ring_run.store.kcql(topic, ring_run.target)
    refused = ring_run.persister(env={"SINK__KCQL": kcql}).start(wait_ready=False)
    assert refused.wait(60) == 2, refused.log_tail()
    assert f"sink.kcql [env FLUXGATE_HZ_SINK__KCQL]: {topic}: no such topic" in refused.log_text()
    assert f"--create --topic {topic} --partitions 3`" in refused.log_text()

    creation = {"KAFKA__TOPIC_CREATION__ENABLE": "true", "KAFKA__TOPIC_CREATION__PARTITIONS": "2"}
    persister = ring_run.persister(env={"SINK__KCQL": kcql, **creation}).start()
    admin = AdminClient({"bootstrap.servers": ring_run.stack.bootstrap})
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 2
    admin.delete_topics([topic])[topic].result(30)
    persister.wait_until(lambda: not persister.ready(), "not ready once its topic is deleted", 45)
    assert "kafka.topic.missing" in persister.log_text()
    assert persister.terminate() == 0, persister.log_tail()
