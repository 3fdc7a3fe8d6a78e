"""The sink test suite every persister passes against its real store (redpanda connect's StreamTests).

A persister's tests subclass :class:`SinkSuite` and provide a ``store`` fixture returning
its :class:`StoreUnderTest`; the root conftest's ``stack`` fixture gives Kafka and the
registry. Each test runs the persister as its own process, on its own topic, group,
dead-letter topic and target, so tests never see each other's records.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder, registry_client
from fluxgate_core.settings import RegistrySettings
from fluxgate_sink.kcql import safe_id
from fluxgate_testing import consume, free_port, unique_topic
from fluxgate_testing.aggregates import temperature_aggregate
from fluxgate_testing.process import ServiceProcess
from fluxgate_testing.sink.store import StoreUnderTest

DAY = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
#: The longest device id the gateways take, in a 3-byte script: 768 bytes of UTF-8, an id
#: over Elasticsearch's 512-byte ``_id`` (issue 35).
LONGEST_DEVICE_ID = "温" * 256
#: A device id no gateway takes but Kafka carries: 70,002 bytes, over every store's key limits
#: (Cassandra's 65,535-byte key component, Lucene's 32,766-byte term).
HOSTILE_DEVICE_ID = "温" * 23_334


def aggregate(device: int, window: int, **changes: Any) -> dict[str, Any]:
    """A TemperatureAggregate of device ``device`` for the ``window``-th minute of ``DAY``."""
    start = DAY + timedelta(minutes=window)
    varied = {
        "count": 2 + window % 5,
        "min": 18.0 + device % 7,
        "max": 24.5 + window % 3,
        "mean": 21.25,
        "stddev": 0.5,
        "first_event_time": start + timedelta(seconds=1),
        "last_event_time": start + timedelta(seconds=59),
    }
    return temperature_aggregate(f"device-{device:04d}", start, **{**varied, **changes})


def aggregates(count: int, devices: int = 50) -> list[dict[str, Any]]:
    return [aggregate(i % devices, i // devices) for i in range(count)]


class Run:
    """One test's topic, target, group and dead-letter topic, and the persister processes on them."""

    def __init__(self, stack: Any, store: StoreUnderTest, registry: Any, partitions: int = 3) -> None:
        self.stack = stack
        self.store = store
        self.topic = unique_topic("suite.aggregates", stack.bootstrap, partitions)
        self.deadletters = unique_topic("suite.deadletters", stack.bootstrap, 1)
        self.target = store.new_target()
        self.registry = registry
        self.group = f"suite-{uuid.uuid4().hex[:8]}"
        self.encoder = AvroEncoder.registered(
            registry, self.topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
        )
        self.producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
        self.processes: list[ServiceProcess] = []

    def produce(self, values: list[dict[str, Any]], *, partition: int | None = None) -> None:
        for value in values:
            self.produce_raw(self.encoder.encode(value), value["device_id"].encode(), partition)
        assert self.producer.flush(30) == 0

    def produce_raw(self, data: bytes, key: bytes, partition: int | None = None) -> None:
        # -1: librdkafka's "unassigned", i.e. the partitioner chooses
        self.producer.produce(self.topic, data, key, partition=-1 if partition is None else partition)

    def persister(
        self, *args: str, target: str | None = None, env: dict[str, str] | None = None, **sink: str
    ) -> ServiceProcess:
        """A persister process (not started) writing this run's topic to ``target``; ``env``
        (names without the service's prefix) comes last."""
        prefix, port = self.store.env_prefix, free_port()
        options = {"batch_age_ms": "100", "deadletter_topic": self.deadletters, "group_id": self.group, **sink}
        env = {
            "KAFKA__BOOTSTRAP_SERVERS": self.stack.bootstrap,
            "REGISTRY__URL": self.stack.registry_url,
            "HTTP__HOST": "127.0.0.1",
            "HTTP__PORT": str(port),
            "SINK__KCQL": self.store.kcql(self.topic, target or self.target),
            # A SIGKILLed member leaves the group after 6 s (the broker's minimum), not 45 s.
            "KAFKA__EXTRA": '{"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}',
            **{f"SINK__{name.upper()}": value for name, value in options.items()},
            **self.store.env(),
            **(env or {}),
        }
        process = ServiceProcess(
            [*self.store.argv, *args],
            {prefix + name: value for name, value in env.items()},
            health_port=port,
            isolate_prefix=prefix,
        )
        self.processes.append(process)
        return process

    def wait_for(self, process: ServiceProcess, ids: int, target: str | None = None, timeout: float = 60) -> None:
        where = target or self.target
        process.wait_until(lambda: len(self.store.documents(where)) >= ids, f"{ids} documents in {where}", timeout)

    def committed(self, partition: int) -> int | None:
        """The group's committed offset of ``partition`` (None if it committed nothing)."""
        consumer = Consumer({"bootstrap.servers": self.stack.bootstrap, "group.id": self.group})
        try:
            (found,) = consumer.committed([TopicPartition(self.topic, partition)], timeout=10)
        finally:
            consumer.close()
        return None if found.offset < 0 else int(found.offset)

    def ids_from(self, offsets: list[int], produced: int) -> set[str]:
        """The ids of this run's ``produced`` records at or past ``offsets[partition]`` in each partition."""
        decoder = AvroDecoder(registry_client(RegistrySettings.model_validate({"url": self.stack.registry_url})))
        records = consume(self.stack.bootstrap, self.topic, expected=produced, idle=0, decoder=decoder)
        return expected_ids([r.record for r in records if r.record and r.offset >= offsets[r.partition]])

    def members(self) -> list[str | None]:
        """The group.instance.id of each member of the group, as the coordinator knows them."""
        admin = AdminClient({"bootstrap.servers": self.stack.bootstrap})
        (described,) = admin.describe_consumer_groups([self.group], request_timeout=10).values()
        return sorted((m.group_instance_id for m in described.result().members), key=str)

    def committed_total(self, partitions: int = 3) -> int:
        return sum(self.committed(p) or 0 for p in range(partitions))

    def close(self) -> None:
        for process in self.processes:
            process.kill()
        self.store.drop(self.target)


def expected_ids(values: list[dict[str, Any]]) -> set[str]:
    """The ids the default PK gives ``values``, made safe as every store gets them (``safe_id``)."""
    return {safe_id(f"{v['device_id']}|{v['metric']}|{int(v['window_start'].timestamp() * 1000)}") for v in values}


# What the store-kill test kills: the subclass's ``server``. `make test` runs the serial tests
# that kill different servers side by side (the root conftest.py groups them by server).
STORE = "store"


@pytest.mark.integration
class SinkSuite:
    """Single record, batch, replay, poison record, NOOP/THROW/RETRY, store and persister killed.

    A subclass provides the fixture ``store`` (a :class:`StoreUnderTest`) and names the
    stack's server its store is (``server``: ``elasticsearch``, ``cassandra`` ...)."""

    server: ClassVar[str]

    @pytest.fixture
    def run(self, stack: Any, store: StoreUnderTest, registry_client: Any) -> Any:
        current = Run(stack, store, registry_client)
        yield current
        current.close()

    def test_a_record(self, run: Run) -> None:
        value = aggregate(7, 0)
        process = run.persister().start()
        run.produce([value])
        run.wait_for(process, 1)
        [(doc_id, doc)] = run.store.documents(run.target).items()
        assert doc_id in expected_ids([value])
        assert doc["device_id"] == "device-0007" and doc["count"] == value["count"] and doc["max"] == value["max"]
        assert process.terminate() == 0

    def test_a_batch(self, run: Run) -> None:
        values = aggregates(600)
        run.produce(values)
        process = run.persister(batch_size="200").start()
        run.wait_for(process, 600)
        assert set(run.store.documents(run.target)) == expected_ids(values)
        assert run.store.count(run.target) == 600
        assert process.metric("fluxgate_sink_records_written_total") == 600
        process.wait_until(lambda: _lag_is_zero(process), "consumer lag 0 on every partition")
        assert process.terminate() == 0
        assert sum(run.committed(p) or 0 for p in range(3)) == 600

    def test_a_backlog_past_the_process_bound_is_written_whole(self, run: Run) -> None:
        """Held to 150 records for the whole process (3 partitions of batches of 100), the
        persister writes, waits and pauses its way through 3,000: every one written once, every
        offset committed, and it never reports holding more than the bound and two polls."""
        values = aggregates(3000)
        run.produce(values)
        process = run.persister(batch_size="100", max_held_records="150", poll_max_records="100").start()
        held: list[float] = []

        def caught_up() -> bool:
            held.append(process.metric("fluxgate_sink_records_held"))
            return _lag_is_zero(process)

        process.wait_until(caught_up, "consumer lag 0 on every partition", timeout=120)
        assert max(held) <= 150 + 2 * 100, held
        assert run.store.count(run.target) == 3000
        assert set(run.store.documents(run.target)) == expected_ids(values)
        assert process.metric("fluxgate_sink_records_written_total") == 3000
        assert process.terminate() == 0
        assert run.committed_total() == 3000

    def test_the_same_batch_twice_is_one_document_per_id(self, run: Run) -> None:
        values = aggregates(100)
        run.produce(values)
        run.produce(values)
        process = run.persister().start()
        process.wait_until(lambda: process.metric("fluxgate_sink_records_written_total") >= 200, "200 writes")
        assert run.store.count(run.target) == 100
        assert set(run.store.documents(run.target)) == expected_ids(values)
        assert process.terminate() == 0

    def test_a_poison_record_is_dead_lettered_under_noop(self, run: Run) -> None:
        good = aggregates(20)
        run.produce(good[:10], partition=0)
        run.produce_raw(b"\x00\x00\x00\x00\x01not avro at all", b"poison", partition=0)
        run.produce([run.store.refused_value(aggregate(999, 0))], partition=0)
        run.produce(good[10:], partition=0)
        process = run.persister(error_policy="NOOP").start()
        run.wait_for(process, 20)
        dead = consume(run.stack.bootstrap, run.deadletters, expected=2, timeout=30)
        assert {d.offset for d in dead} == {0, 1}
        reasons = {d.header("fluxgate.dlq.offset"): d for d in dead}
        assert set(reasons) == {b"10", b"11"}
        assert reasons[b"10"].value == b"\x00\x00\x00\x00\x01not avro at all"
        assert reasons[b"11"].header("fluxgate.dlq.target") == run.target.encode()
        assert reasons[b"11"].header("fluxgate.dlq.topic") == run.topic.encode()
        assert reasons[b"11"].header("fluxgate.dlq.error.class")
        assert set(run.store.documents(run.target)) == expected_ids(good)
        assert process.running and process.terminate() == 0
        assert run.committed(0) == 22

    def test_a_compatible_version_registered_after_start_is_read_and_nothing_dead_lettered(self, run: Run) -> None:
        """Issue 36 §2: the aggregator rolled onto TemperatureAggregate v2 (a new optional field),
        registered while the persister runs, under the default error policy (THROW)."""
        process = run.persister().start()
        v1 = [aggregate(device, 0) for device in range(10)]
        run.produce(v1)
        run.wait_for(process, len(v1))
        schema = schema_dict(TEMPERATURE_AGGREGATE)
        field = {"name": "firmware", "type": ["null", "string"], "default": None}
        schema = {**schema, "fields": [*schema["fields"], field]}
        v2_encoder = AvroEncoder.registered(run.registry, run.topic, json.dumps(schema), schema)
        assert v2_encoder.schema_id != run.encoder.schema_id
        v2 = [aggregate(device, 1, firmware="2.1") for device in range(10)]
        for value in v2:
            run.produce_raw(v2_encoder.encode(value), value["device_id"].encode())
        assert run.producer.flush(30) == 0
        run.wait_for(process, len(v1) + len(v2))
        documents = run.store.documents(run.target)
        assert set(documents) == expected_ids(v1 + v2)
        assert {documents[i].get("firmware") for i in expected_ids(v2)} == {"2.1"}
        assert {documents[i].get("firmware") for i in expected_ids(v1)} == {None}
        assert process.metric("fluxgate_sink_records_dead_lettered_total") == 0
        assert process.running and process.terminate() == 0

    def test_the_longest_device_id_in_a_multibyte_script_stops_nothing(self, run: Run) -> None:
        """Issue 35: six readings of a device whose id was 256 characters of ``温`` stopped the
        Elasticsearch persister (the whole bulk request refused over one ``_id``). Under the
        default policy, THROW, every record is written, under its safe id, and committed."""
        good = aggregates(60)
        values = [*good[:25], aggregate(0, 0, device_id=LONGEST_DEVICE_ID), *good[25:]]
        run.produce(values, partition=0)
        process = run.persister().start()
        run.wait_for(process, len(values))
        process.wait_until(lambda: run.committed(0) == len(values), "every offset committed")
        assert set(run.store.documents(run.target)) == expected_ids(values)
        assert process.running and process.terminate() == 0

    def test_one_hostile_item_in_a_batch_loses_nothing_and_stops_nothing(self, run: Run) -> None:
        """One record over every store's key limits among 200 good ones, in one batch: the good
        ones are written, the hostile one is written (under its safe id) or dead-lettered with
        the store's reason, never both, every offset is committed and the persister runs on."""
        good = aggregates(200)
        hostile = aggregate(0, 0, device_id=HOSTILE_DEVICE_ID)
        run.produce([*good[:120], hostile, *good[120:]], partition=0)
        process = run.persister(error_policy="NOOP", batch_size="500").start()
        run.wait_for(process, len(good))
        process.wait_until(lambda: run.committed(0) == 201, "every offset committed")
        documents = set(run.store.documents(run.target))
        dead_lettered = consume(run.stack.bootstrap, run.deadletters, expected=1, timeout=5)
        assert len(dead_lettered) == process.metric("fluxgate_sink_records_dead_lettered_total")
        if dead_lettered:
            (dead,) = dead_lettered
            assert dead.header("fluxgate.dlq.offset") == b"120"
            assert dead.header("fluxgate.dlq.error.class") and dead.header("fluxgate.dlq.reason")
            assert documents == expected_ids(good)
        else:
            assert documents == expected_ids([*good, hostile])
        assert process.running and process.terminate() == 0

    def test_throw_stops_without_committing_past_the_failure(self, run: Run) -> None:
        values = aggregates(10)
        run.produce(values[:5], partition=0)
        run.produce([run.store.refused_value(aggregate(999, 0))], partition=0)
        run.produce(values[5:], partition=0)
        process = run.persister(error_policy="THROW").start()
        assert process.wait(60) == 1
        assert f"{run.topic}/0/5" in process.log_text()
        committed = run.committed(0)
        assert committed is None or committed <= 5

    def test_retry_retries_then_stops(self, run: Run) -> None:
        run.produce([aggregate(1, 0), run.store.refused_value(aggregate(999, 0))], partition=0)
        process = run.persister(error_policy="RETRY", max_retries="3", retry_interval_ms="50").start()
        assert process.wait(60) == 1
        log = process.log_text()
        assert log.count("sink.retrying") == 3 and "RETRY (out of retries)" in log and f"{run.topic}/0/1" in log
        committed = run.committed(0)
        assert committed is None or committed <= 1

    @pytest.mark.serial(kills=STORE)
    def test_the_store_killed_mid_stream_loses_and_doubles_nothing(self, run: Run) -> None:
        """A durable store ends with every record once. A store that keeps data in memory only
        restarts empty, and Kafka rightly never redelivers what was committed: what the
        persister owes it then is every record not committed when the store went down, once."""
        values = aggregates(1500)
        process = run.persister(batch_size="50").start()
        producing = threading.Thread(target=_trickle, args=(run, values, 30), daemon=True)
        producing.start()
        run.wait_for(process, 100)
        run.store.kill()
        process.wait_until(lambda: not process.ready(), "/readyz 503 while the store is down", 60)
        assert process.metric("fluxgate_sink_store_up") == 0
        time.sleep(2)  # writes keep failing meanwhile: the batch in hand is kept, not skipped
        committed = [run.committed(p) or 0 for p in range(3)]  # settled: nothing commits while it is down
        run.store.start()
        producing.join(120)
        owed = expected_ids(values) if run.store.durable else run.ids_from(committed, len(values))
        assert len(owed) > 1000, "the store died too late to leave records unwritten: the test proves little"
        process.wait_until(lambda: owed <= set(run.store.documents(run.target)), "every record owed", 120)
        process.wait_until(process.ready, "/readyz 200 once the store is back")
        documents = run.store.documents(run.target)
        assert run.store.count(run.target) == len(documents)  # nothing doubled
        if run.store.durable:
            assert set(documents) == owed
        assert process.terminate() == 0

    def test_the_persister_killed_mid_batch_loses_and_doubles_nothing(self, run: Run) -> None:
        values = aggregates(3000)
        run.produce(values[:2000])
        first = run.persister(batch_size="100").start()
        run.wait_for(first, 200)
        # Frozen before the last 1000 exist, it is killed with records left to write whatever the
        # machine's speed (it once wrote all 3000 while a loaded test waited for 200).
        first.pause()
        run.produce(values[2000:])
        first.kill()
        written = len(run.store.documents(run.target))
        assert written <= 2000, "it wrote records produced after it was frozen"
        second = run.persister(batch_size="100").start()
        run.wait_for(second, 3000)
        assert run.store.count(run.target) == 3000
        assert set(run.store.documents(run.target)) == expected_ids(values)
        assert second.terminate() == 0

    def test_a_killed_static_member_restarted_gets_its_partitions_back_at_once(self, run: Run) -> None:
        """Static membership: restarted with its group.instance.id, a SIGKILLed persister is
        given its partitions back without the group first waiting out the dead member's session
        (a new dynamic member waits for exactly that: the rebalance needs the old one gone).
        The dead member's last heartbeat came at most a heartbeat before the kill, so a group
        that waited for its session could not hand the partitions over sooner than the session
        less a heartbeat after the kill: writing sooner proves it did not wait. The session is
        long so that a loaded machine's slow start stays far inside it."""
        session_s, heartbeat_s = 120, 1
        kafka = json.dumps(
            {"session.timeout.ms": str(session_s * 1000), "heartbeat.interval.ms": str(heartbeat_s * 1000)}
        )
        static = {"KAFKA__GROUP_INSTANCE_ID": f"{run.group}-0", "KAFKA__EXTRA": kafka}
        first = run.persister(env=static).start()
        run.produce(aggregates(100))
        run.wait_for(first, 100)
        assert run.members() == [f"{run.group}-0"]
        killed = time.monotonic()
        first.kill()
        run.produce([aggregate(i % 50, 10 + i // 50) for i in range(100)])  # while no one holds the partitions
        second = run.persister(env=static).start(timeout=session_s)
        run.wait_for(second, 200, timeout=session_s)
        took = time.monotonic() - killed
        assert took < session_s - heartbeat_s, f"writing {took:.1f} s after the kill: it waited for the session"
        assert run.members() == [f"{run.group}-0"]  # the same member, not a second one beside a ghost
        assert run.store.count(run.target) == 200
        assert second.terminate() == 0

    def test_a_second_persister_joining_mid_stream_loses_nothing(self, run: Run) -> None:
        first = run.persister(batch_size="50").start()
        flowing = Flow(run)
        flowing.start()
        try:
            run.wait_for(first, 100)
            second = run.persister(batch_size="50").start()  # the group rebalances while records flow
            written = "fluxgate_sink_records_written_total"
            second.wait_until(lambda: second.metric(written) > 0, "the second member writing its share", 60)
        finally:
            produced = flowing.finish()
        run.wait_for(second, len(produced), timeout=60)
        # Commits trail the writes (a new owner re-reads from the last commit): wait for them.
        second.wait_until(lambda: run.committed_total() == len(produced), "every offset committed")
        assert first.terminate() == 0 and second.terminate() == 0
        assert run.committed_total() == len(produced)  # and none past the end
        assert run.store.count(run.target) == len(produced)
        assert set(run.store.documents(run.target)) == expected_ids(produced)

    def test_a_replay_rebuilds_a_fresh_store_identical(self, run: Run) -> None:
        values = aggregates(400)
        run.produce(values)
        first = run.persister().start()
        run.wait_for(first, 400)
        assert first.terminate() == 0
        fresh = run.store.new_target()
        try:
            replay = run.persister("--from-beginning", target=fresh).start()  # same group: it committed all
            run.wait_for(replay, 400, target=fresh)
            assert replay.terminate() == 0
            assert run.store.documents(fresh) == run.store.documents(run.target)
            assert run.store.count(fresh) == 400
        finally:
            run.store.drop(fresh)


class Flow:
    """Aggregates produced a chunk at a time in the background until :meth:`finish`."""

    def __init__(self, run: Run, chunk: int = 50) -> None:
        self._run, self._chunk = run, chunk
        self._stop = threading.Event()
        self.produced: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._produce, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> list[dict[str, Any]]:
        """Stop producing; everything produced (Kafka confirmed all of it)."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the producer did not stop"
        return self.produced

    def _produce(self) -> None:
        while not self._stop.is_set() and len(self.produced) < 100_000:
            first = len(self.produced)
            chunk = [aggregate(i % 50, i // 50) for i in range(first, first + self._chunk)]
            self._run.produce(chunk)
            self.produced.extend(chunk)
            time.sleep(0.05)


def _lag_is_zero(process: ServiceProcess) -> bool:
    shown = "fluxgate_sink_consumer_lag{" in process.metrics()
    return shown and process.metric("fluxgate_sink_consumer_lag") == 0


def _trickle(run: Run, values: list[dict[str, Any]], chunk: int) -> None:
    """Produce ``values`` a chunk at a time, so the store dies with records still coming."""
    for start in range(0, len(values), chunk):
        run.produce(values[start : start + chunk])
        time.sleep(0.05)
