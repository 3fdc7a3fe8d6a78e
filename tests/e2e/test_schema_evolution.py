"""docs/schema-evolution.md, performed: SensorReading gains an optional field mid-run, and
nothing is lost.

The real services run as processes on this test's own topics: two mqtt-proxy gateways, the
aggregator, the Elasticsearch persister and device-status. Devices behind both gateways
publish. The doc's own command blocks (read from the file, not copied here) check and
register v2. Gateway B is then rolled: started again on a schemas folder holding v2, as its
new image would be. Devices behind both gateways keep publishing, so v1 and v2 records
interleave. Afterwards no record is dead-lettered or late, every reading is in the topic
once, each of B's readings after the roll carries v2's id, and every window of every device
is exact, in the aggregates topic and in Elasticsearch.

A ticker device keeps publishing at the wall clock's time until every expected window is
written. That closes the last windows, whether the job's watermark follows event time or
the gateways' ingest time.

TemperatureAggregate gains the same field, registered with the same doc commands, and each
persister reads v1 and v2 aggregates from one topic. Elasticsearch indexes the field (as a
keyword), and Hazelcast's JSON values carry it. Scylla's default statement (AUTOCREATE)
adds the column at the first new aggregate and writes every aggregate, under the default
error policy (THROW), without stopping. The doc's other ways (its IGNORE statement, or, for
a table made by hand, its ALTER TABLE and the statement without AUTOCREATE) write every
aggregate too, and nothing is dead-lettered.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aggregator_reference import as_millis, assert_aggregate_equal, by_window, expected_aggregates
from cassandra import InvalidRequest
from confluent_kafka import Consumer, Producer, TopicPartition
from elasticsearch_store import ElasticsearchUnderTest
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic
from fluxgate_testing.aggregates import temperature_aggregate
from hazelcast import HazelcastClient
from scylla_store import CassandraUnderTest, connect

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_dict, schema_text, schemas_dir
from fluxgate_core.serde import AvroDecoder, AvroEncoder, wire_schema_id

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "schema-evolution.md"
BIN = Path(sys.executable).parent
WINDOW_MS = 5_000
STEP_S = 0.5  # each device publishes one reading this often
PHASE_S = 5.0  # how long the devices publish before the rollout, and after it
TICKER = "ticker"
_BLOCK = re.compile(r"<!-- schema-evolution: (?P<name>[\w-]+) -->\n```(?P<lang>\w+)\n(?P<text>.*?)\n```", re.DOTALL)


def doc_blocks() -> dict[str, str]:
    """The doc's marked fenced blocks, by name."""
    return {m["name"]: m["text"] for m in _BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def doc_names(blocks: dict[str, str]) -> dict[str, str]:
    """The variables the doc's commands use, with the doc's values."""
    return dict(line.split("=", 1) for line in blocks["names"].splitlines() if line.strip())


def run_step(blocks: dict[str, str], name: str, env: dict[str, str]) -> str:
    """One of the doc's command blocks, run as a reader would run it; its output."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", blocks[name]],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"step {name} failed ({done.returncode}): {done.stdout}{done.stderr}"
    return done.stdout


def schemas_with_new_field(field_line: str, into: Path, name: str = SENSOR_READING) -> Path:
    """A copy of ``schemas/`` with the doc's field appended last to schema ``name``, as step 1
    says (what a writer's new image holds); the path of the changed file."""
    into.mkdir()
    for avsc in schemas_dir().glob("*.avsc"):
        shutil.copy(avsc, into / avsc.name)
    path = into / f"{name}.avsc"
    text = path.read_text(encoding="utf-8")
    end = text.rindex("\n  ]")
    path.write_text(f"{text[:end]},\n    {field_line}{text[end:]}", encoding="utf-8")
    assert json.loads(path.read_text())["fields"][-1] == json.loads(field_line)
    return path


class Topics:
    def __init__(self, bootstrap: str) -> None:
        self.readings = unique_topic("e2e.evolution.readings", bootstrap)
        self.aggregated = unique_topic("e2e.evolution.aggregated", bootstrap)
        self.deadletter = unique_topic("e2e.evolution.deadletter", bootstrap)
        self.late = unique_topic("e2e.evolution.late", bootstrap)
        self.persisters_deadletter = unique_topic("e2e.evolution.persisters-deadletter", bootstrap)
        self.status = unique_topic("e2e.evolution.status", bootstrap)


def service(argv: list[str], prefix: str, settings: dict[str, str], log: Path, **env: str) -> ServiceProcess:
    port = free_port()
    values = {**settings, "HTTP__HOST": "127.0.0.1", "HTTP__PORT": str(port), "LOG__JSON_OUTPUT": "false"}
    return ServiceProcess(
        argv,
        {**{prefix + k: v for k, v in values.items()}, **env},
        health_port=port,
        log_path=log,
        isolate_prefix=prefix,
    )


def gateway(stack: Any, topics: Topics, mqtt_root: str, log: Path, **env: str) -> ServiceProcess:
    route = {"filter": f"{mqtt_root}/+/+", "topic": topics.readings, "device_from": "topic:1",
             "metric_from": "topic:2", "qos": 1}  # fmt: skip
    settings = {
        "ROUTES": json.dumps([route]),
        "DEADLETTER_TOPIC": topics.deadletter,
        "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
        "REGISTRY__URL": stack.registry_url,
        "MQTT__HOST": stack.mqtt_host,
        "MQTT__PORT": str(stack.mqtt_port),
        "MQTT__CLIENT_ID": f"{mqtt_root}-proxy",
    }
    return service([str(BIN / "fluxgate-mqtt-proxy")], "FLUXGATE_MQTT_", settings, log, **env)


class Devices:
    """Devices publishing to Mosquitto, one ``mosquitto_pub -l`` each, a reading every
    ``STEP_S`` while active, stamped with the wall clock; what each sent is kept."""

    def __init__(self, stack: Any, roots: dict[str, str]) -> None:
        self._stack = stack
        self._roots = roots  # device -> MQTT root (which gateway reads it)
        self._publishers: dict[str, subprocess.Popen[str]] = {}
        self.active: set[str] = set()
        self.lock = threading.Lock()  # held by a tick: a change of ``active`` waits for it
        self.sent: dict[str, list[tuple[int, float]]] = {device: [] for device in roots}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="devices", daemon=True)

    def __enter__(self) -> Devices:
        for device, root in self._roots.items():
            self._publishers[device] = subprocess.Popen(
                ["mosquitto_pub", "-h", self._stack.mqtt_host, "-p", str(self._stack.mqtt_port), "-q", "1",
                 "-i", f"{root}-{device}", "-t", f"{root}/{device}/temperature", "-l"],
                stdin=subprocess.PIPE, text=True,
            )  # fmt: skip
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for publisher in self._publishers.values():
            assert publisher.stdin is not None
            publisher.stdin.close()
            try:
                publisher.wait(timeout=10)
            except subprocess.TimeoutExpired:
                publisher.kill()

    def _run(self) -> None:
        tick = 0
        while not self._stop.wait(STEP_S):
            tick += 1
            with self.lock:
                for number, device in enumerate(sorted(self.active)):
                    self._publish(device, 15.0 + number + (tick % 13) * 0.25)

    def _publish(self, device: str, value: float) -> None:
        now = int(time.time() * 1000)
        stdin = self._publishers[device].stdin
        assert stdin is not None
        stdin.write(json.dumps({"timestamp": now, "temperature": value, "unit": "Cel"}) + "\n")
        stdin.flush()
        self.sent[device].append((now, value))


def record_count(bootstrap: str, topic: str) -> int:
    """How many records the topic holds (each partition's end offset, summed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}"})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in metadata.partitions]
    finally:
        consumer.close()
    return sum(high - low for low, high in ends)


def millis(value: Any) -> int:
    """An Elasticsearch date as the persister wrote it (ISO-8601 or epoch ms) in epoch ms."""
    return int(datetime.fromisoformat(value).timestamp() * 1000) if isinstance(value, str) else int(value)


@pytest.fixture
def topics(stack: Any) -> Topics:
    return Topics(stack.bootstrap)


@pytest.fixture
def processes() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for process in reversed(started):
        process.kill()


@pytest.mark.spark  # the aggregator, as its own process
@pytest.mark.timeout(600)
def test_the_documented_rollout_of_a_new_sensor_reading_field_loses_nothing(
    stack: Any,
    registry_client: Any,
    elasticsearch: str,
    topics: Topics,
    processes: list[ServiceProcess],
    tmp_path: Path,
) -> None:
    blocks = doc_blocks()
    assert set(doc_names(blocks)) == {"REGISTRY", "TOPIC", "SCHEMA"}, "the doc's commands take these names"
    v2_schema = schemas_with_new_field(blocks["field"], tmp_path / "schemas-v2")
    names = {"REGISTRY": stack.registry_url, "TOPIC": topics.readings, "SCHEMA": str(v2_schema)}
    store, target = ElasticsearchUnderTest(elasticsearch), f"e2e-evolution-{uuid.uuid4().hex[:8]}"
    suffix = uuid.uuid4().hex[:8]
    roots = {"gw-a": f"evolution-a-{suffix}", "gw-b": f"evolution-b-{suffix}"}

    aggregator = service([str(BIN / "fluxgate-aggregator"), "run"], "FLUXGATE_AGG_", {
        "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, "REGISTRY__URL": stack.registry_url,
        "INPUT_TOPIC": topics.readings, "OUTPUT_TOPIC": topics.aggregated, "DEADLETTER_TOPIC": topics.deadletter,
        "LATE_TOPIC": topics.late, "PROGRESS_GROUP": f"e2e-evolution-{suffix}",
        "CHECKPOINT_DIR": str(tmp_path / "checkpoints"), "SPARK__MASTER": "local[2]",
        "SPARK__SHUFFLE_PARTITIONS": "2", "SPARK__TRIGGER_INTERVAL": "1 second",
        "WINDOW__SIZE": "5 seconds", "WINDOW__WATERMARK": "4 seconds",
        # Only the batch that meets the new id may learn it: the supervisor's periodic look must not.
        "SCHEMA_REFRESH_SECONDS": "3600",
    }, tmp_path / "aggregator.log")  # fmt: skip
    persister = service([str(BIN / "fluxgate-es-persister")], "FLUXGATE_ES_", {
        "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, "REGISTRY__URL": stack.registry_url,
        "ELASTICSEARCH__HOSTS": json.dumps([elasticsearch]), "RETENTION__ENABLED": "false",
        "SINK__KCQL": f"INSERT INTO {target} SELECT * FROM {topics.aggregated}"
                      " PK device_id, metric, window_start WITHINDEXSUFFIX=-{YYYY.MM.dd}",
        "SINK__GROUP_ID": f"e2e-evolution-es-{suffix}", "SINK__DEADLETTER_TOPIC": topics.persisters_deadletter,
        "SINK__BATCH_AGE_MS": "100",
    }, tmp_path / "es-persister.log")  # fmt: skip
    status = service([str(BIN / "fluxgate-device-status")], "FLUXGATE_STATUS_", {
        "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, "REGISTRY__URL": stack.registry_url,
        "STATUS__APP_ID": f"e2e-evolution-status-{suffix}", "STATUS__INPUT_TOPIC": topics.readings,
        "STATUS__STATUS_TOPIC": topics.status, "STATUS__DATA_DIR": str(tmp_path / "status"),
    }, tmp_path / "device-status.log")  # fmt: skip
    gateway_a = gateway(stack, topics, roots["gw-a"], tmp_path / "gateway-a.log")
    gateway_b = gateway(stack, topics, roots["gw-b"], tmp_path / "gateway-b.log")
    for process in (aggregator, persister, status, gateway_a, gateway_b):
        processes.append(process.start(wait_ready=False))
    aggregator.wait_ready(timeout=240)
    for process in (persister, status, gateway_a, gateway_b):
        process.wait_ready(timeout=60)

    a_devices, b_devices = ["a1", "a2"], ["b1", "b2"]
    device_roots = {**{d: roots["gw-a"] for d in [*a_devices, TICKER]}, **{d: roots["gw-b"] for d in b_devices}}
    with Devices(stack, device_roots) as devices:
        devices.active |= {TICKER, *a_devices, *b_devices}
        time.sleep(PHASE_S)  # v1 from both gateways

        # Steps 2 and 3, as the doc writes them, while every device publishes with v1.
        assert json.loads(run_step(blocks, "check", names)) == {"is_compatible": True}
        v2_id = json.loads(run_step(blocks, "register", names))["id"]
        versions = json.loads(run_step(blocks, "versions", names))
        assert len(versions) == 2, f"v1 (the gateways' and the aggregator's) and v2: {versions}"

        # Step 5: gateway B rolled onto the new schemas; A's devices go on writing v1.
        with devices.lock:
            devices.active -= set(b_devices)
        assert gateway_b.terminate() == 0, gateway_b.log_tail()
        rolled_at_ms = int(time.time() * 1000)
        gateway_b.env["FLUXGATE_SCHEMAS_DIR"] = str(v2_schema.parent)
        gateway_b.start(timeout=60)
        with devices.lock:
            devices.active |= set(b_devices)
        assert json.loads(run_step(blocks, "versions", names)) == versions, "the rolled gateway added a version"
        time.sleep(PHASE_S)  # v2 from B, v1 from A
        with devices.lock:
            devices.active -= {*a_devices, *b_devices}

        sent = {device: devices.sent[device] for device in [*a_devices, *b_devices]}
        readings = readings_sent(stack, registry_client, topics.readings, sent)
        want = expected_aggregates([as_millis(r.record or {}) for r in readings], WINDOW_MS, WINDOW_MS)
        # The ticker publishes on meanwhile: its readings close the last windows.
        got = aggregates_until(stack, registry_client, topics.aggregated, set(want))
    assert_exact(got, want)

    # B's readings after the roll carry v2's id, A's all v1's: the rollout really mixed them.
    # One B published before the roll may carry either: the broker keeps what the old gateway
    # had not read yet in B's session, and the rolled gateway converts it.
    ids = Counter((r.record["device_id"], wire_schema_id(r.value)) for r in readings if r.record)
    after_roll = Counter(
        wire_schema_id(r.value)
        for r in readings
        if r.record and r.record["device_id"] in b_devices and as_millis(r.record)["event_time"] > rolled_at_ms
    )
    v2_readings = sum(1 for device in b_devices for at, _ in sent[device] if at > rolled_at_ms)
    assert after_roll == {v2_id: v2_readings} and v2_readings > 0, f"B after the roll: {after_roll}"
    v1_id = registry_client.get_version(f"{topics.readings}-value", versions[0]).schema_id
    assert {schema_id for (device, schema_id) in ids if device in a_devices} == {v1_id}, "A writes v1 throughout"

    # Step 7: nothing dead-lettered, nothing late, by any service.
    for topic in (topics.deadletter, topics.persisters_deadletter, topics.late):
        assert record_count(stack.bootstrap, topic) == 0, f"records on {topic}"
    assert aggregator.metric("fluxgate_aggregator_dead_letters") == 0
    assert re.search(rf"aggregator\.writer_schemas_looked_up.*learned=\[{v2_id}\]", aggregator.log_text())
    assert gateway_a.metric("fluxgate_dead_letters_total") == gateway_b.metric("fluxgate_dead_letters_total") == 0
    assert status.metric("fluxgate_status_undecodable_total") == 0
    counts = {device: len(values) for device, values in sent.items()}
    seen: dict[str, object] = {}

    def counted() -> bool:
        seen.update({d: status_reading_count(status, d) for d in counts})
        return seen == counts

    def said() -> str:
        names = ("readings_total", "replayed_readings_total", "registry_waits_total")
        return f"readings {counts}, seen {seen}, " + ", ".join(
            f"{n} {status.metric(f'fluxgate_status_{n}')}" for n in names
        )

    status.wait_until(counted, said)

    persister.wait_until(lambda: len(stored(store, target, want)) == len(want), f"{len(want)} windows in {target}")
    assert_exact_in_store(stored(store, target, want), want)
    assert persister.metric("fluxgate_sink_records_dead_lettered_total") == 0


def readings_sent(
    stack: Any, registry: Any, topic: str, sent: dict[str, list[tuple[int, float]]]
) -> list[ConsumedRecord]:
    """The test devices' readings on the topic, once all arrived; each exactly as sent, once."""
    decoder = AvroDecoder(registry)
    total = sum(map(len, sent.values()))

    def ours(records: list[ConsumedRecord]) -> list[ConsumedRecord]:
        return [r for r in records if r.record and r.record["device_id"] in sent]

    got = ours(consume(stack.bootstrap, topic, decoder=decoder, timeout=60, complete=lambda r: len(ours(r)) >= total))
    arrived = Counter(
        (r.record["device_id"], as_millis(r.record)["event_time"], r.record["value"]) for r in got if r.record
    )
    assert arrived == Counter((d, at, v) for d, values in sent.items() for at, v in values)
    return got


def aggregates_until(
    stack: Any, registry: Any, topic: str, windows: set[tuple[str, int]]
) -> dict[tuple[str, int], list[Any]]:
    """The aggregates of ``windows``' devices, read until every one of ``windows`` is there."""
    decoder = AvroDecoder(registry, schema_dict(TEMPERATURE_AGGREGATE))
    devices = {device for device, _ in windows}

    def ours(records: list[ConsumedRecord]) -> dict[tuple[str, int], list[Any]]:
        return {k: v for k, v in by_window(records).items() if k[0] in devices}

    got = consume(stack.bootstrap, topic, decoder=decoder, timeout=120, idle=2,
                  complete=lambda records: windows <= set(ours(records)))  # fmt: skip
    return ours(got)


def assert_exact(got: dict[tuple[str, int], list[Any]], want: dict[tuple[str, int], dict[str, Any]]) -> None:
    assert set(got) == set(want), f"missing {sorted(set(want) - set(got))}, unexpected {sorted(set(got) - set(want))}"
    for key, emitted in got.items():
        assert len(emitted) == 1, f"window {key} emitted {len(emitted)} times"
        assert_aggregate_equal(emitted[0], want[key])


def stored(store: ElasticsearchUnderTest, target: str, want: dict[tuple[str, int], Any]) -> dict[Any, Any]:
    devices = {device for device, _ in want}
    documents = store.documents(target).values()
    return {(d["device_id"], millis(d["window_start"])): d for d in documents if d["device_id"] in devices}


def assert_exact_in_store(documents: dict[Any, Any], want: dict[tuple[str, int], dict[str, Any]]) -> None:
    assert set(documents) == set(want)
    for key, document in documents.items():
        expected = want[key]
        assert (document["count"], document["min"], document["max"]) == (
            expected["count"],
            expected["min"],
            expected["max"],
        ), key
        assert math.isclose(document["mean"], expected["mean"], rel_tol=1e-12), key


def status_reading_count(status: ServiceProcess, device: str) -> int | str:
    """The readings device-status counted for ``device``; else its answer, to be told apart."""
    code, body = status.get(f"/devices/{device}")
    return int(json.loads(body)["readings"]) if code == 200 else f"HTTP {code}: {body[:200]!r}"


# -- TemperatureAggregate: what each store does with the new field ---------------------------

DOC_TABLE, DOC_TOPIC = "fluxgate.temperature_aggregates", "temperatures.aggregated"


def doc_kcql(blocks: dict[str, str], name: str, table: str, topic: str) -> str:
    """The Scylla persister's statement a doc block sets, on this test's table and topic."""
    (setting,) = shlex.split(blocks[name])
    variable, _, kcql = setting.partition("=")
    assert variable == "FLUXGATE_SCYLLA_SINK__KCQL"
    return kcql.replace(DOC_TABLE, table).replace(DOC_TOPIC, topic)


class AggregatesRun:
    """One topic of aggregates, v1 then v2 (the doc's field set), and persisters reading it."""

    def __init__(self, stack: Any, registry: Any, blocks: dict[str, str], tmp_path: Path) -> None:
        self.stack, self.tmp_path = stack, tmp_path
        self.topic = unique_topic("e2e.evolution.aggregates", stack.bootstrap, 1)
        # What the aggregator registers at start, before the rollout.
        v1 = AvroEncoder.registered(
            registry, self.topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
        )
        field = json.loads(blocks["field"])
        v2_path = schemas_with_new_field(blocks["field"], tmp_path / "schemas-v2", TEMPERATURE_AGGREGATE)
        names = {"REGISTRY": stack.registry_url, "TOPIC": self.topic, "SCHEMA": str(v2_path)}
        assert json.loads(run_step(blocks, "check", names)) == {"is_compatible": True}
        v2 = AvroEncoder(json.loads(v2_path.read_text()), json.loads(run_step(blocks, "register", names))["id"])
        start = datetime.fromisoformat("2026-11-26T12:00:00+00:00")
        self.v1 = [temperature_aggregate(f"d{n}", start + timedelta(minutes=n)) for n in range(3)]
        self.v2 = [{**temperature_aggregate(f"d{n}", start + timedelta(minutes=n)), field["name"]: "2.1"}
                   for n in range(3, 6)]  # fmt: skip
        self.field = field["name"]
        producer = Producer({"bootstrap.servers": stack.bootstrap})
        for encoder, records in ((v1, self.v1), (v2, self.v2)):
            for record in records:
                producer.produce(self.topic, encoder.encode(record), record["device_id"].encode())
        assert producer.flush(30) == 0

    def persister(self, store: Any, kcql: str, name: str, **env: str) -> tuple[ServiceProcess, str]:
        """A persister (started) of ``store`` on this topic with statement ``kcql``; its dead-letter topic."""
        dead = unique_topic("e2e.evolution.persisters-deadletter", self.stack.bootstrap, 1)
        settings = {
            "KAFKA__BOOTSTRAP_SERVERS": self.stack.bootstrap, "REGISTRY__URL": self.stack.registry_url,
            "SINK__KCQL": kcql, "SINK__GROUP_ID": f"e2e-evolution-{uuid.uuid4().hex[:8]}",
            "SINK__DEADLETTER_TOPIC": dead, "SINK__BATCH_AGE_MS": "100", **store.env(), **env,
        }  # fmt: skip
        process = service(list(store.argv), store.env_prefix, settings, self.tmp_path / f"{name}.log")
        return process.start(timeout=60), dead


@pytest.mark.timeout(300)
def test_a_new_temperature_aggregate_field_in_each_store_as_documented(
    stack: Any,
    registry_client: Any,
    elasticsearch: str,
    cassandra: tuple[str, int],
    hazelcast: tuple[str, str],
    processes: list[ServiceProcess],
    tmp_path: Path,
) -> None:
    blocks = doc_blocks()
    run = AggregatesRun(stack, registry_client, blocks, tmp_path)
    everything = len(run.v1) + len(run.v2)

    # Elasticsearch: dynamic mapping indexes it (a string: keyword).
    es = ElasticsearchUnderTest(elasticsearch)
    index = f"e2e-evolution-{uuid.uuid4().hex[:8]}"
    kcql = f"INSERT INTO {index} SELECT * FROM {run.topic} PK device_id, metric, window_start"
    kcql += " WITHINDEXSUFFIX=-{YYYY.MM.dd}"
    persister, dead = run.persister(es, kcql, "es-persister")
    processes.append(persister)
    persister.wait_until(lambda: es.count(index) == everything, f"{everything} documents")
    assert Counter(d.get(run.field) for d in es.documents(index).values()) == {None: 3, "2.1": 3}
    mapping = es.client.indices.get_mapping(index=index)
    assert {m["mappings"]["properties"][run.field]["type"] for m in mapping.values()} == {"keyword"}
    assert record_count(stack.bootstrap, dead) == 0

    # Hazelcast, WITHFORMAT JSON: one more key in each new value.
    ringbuffer = f"e2e_evolution_{uuid.uuid4().hex[:8]}"
    hz = HazelcastPersister(*hazelcast)
    kcql = f"INSERT INTO {ringbuffer} SELECT * FROM {run.topic} STOREAS RING_BUFFER WITHFORMAT JSON"
    persister, dead = run.persister(hz, kcql, "hazelcast-persister")
    processes.append(persister)
    persister.wait_until(lambda: len(hz.values(ringbuffer)) == everything, f"{everything} ringbuffer items")
    assert [value.get(run.field) for value in hz.values(ringbuffer)] == [None] * 3 + ["2.1"] * 3
    assert record_count(stack.bootstrap, dead) == 0
    hz.close()

    # Scylla, the default statement (AUTOCREATE) and error policy (THROW): the persister adds the
    # column at the first new aggregate and writes every one, and it keeps running.
    cluster, session = connect(cassandra)
    scylla = CassandraUnderTest(cassandra, session)
    table = f"fluxgate_test.evolution_{uuid.uuid4().hex[:8]}"
    persister, dead = run.persister(scylla, f"UPSERT INTO {table} SELECT * FROM {run.topic} AUTOCREATE", "scylla")
    processes.append(persister)

    def values() -> Counter[Any]:
        try:
            return Counter(row[0] for row in session.execute(f"SELECT {run.field} FROM {table}"))
        except InvalidRequest:  # no column yet: nothing of the field written
            return Counter()

    persister.wait_until(lambda: values() == {None: 3, "2.1": 3}, "the field in every row")
    assert "scylla.column_added" in persister.log_text() and record_count(stack.bootstrap, dead) == 0
    assert persister.terminate() == 0, "a clean drain: the persister never stopped"

    # The doc's IGNORE: the field is dropped, and the table gets no column for it.
    table = f"fluxgate_test.evolution_{uuid.uuid4().hex[:8]}"
    ignoring = doc_kcql(blocks, "scylla-ignore", table, run.topic)
    persister, dead = run.persister(scylla, ignoring, "scylla-persister-ignore")
    processes.append(persister)
    persister.wait_until(lambda: scylla.count(table) == everything, f"{everything} rows")
    assert record_count(stack.bootstrap, dead) == 0 and persister.terminate() == 0
    assert run.field not in columns_of(session, table)

    # A table made by hand (here, the one IGNORE left): the doc's ALTER TABLE, and the statement
    # without AUTOCREATE.
    session.execute(blocks["scylla-alter"].replace(DOC_TABLE, table).rstrip(";"), timeout=60)
    with_column = doc_kcql(blocks, "scylla-column", table, run.topic)
    persister, dead = run.persister(scylla, with_column, "scylla-persister-column")
    processes.append(persister)
    column = f"SELECT {run.field} FROM {table}"
    persister.wait_until(lambda: sum(1 for row in session.execute(column) if row[0] == "2.1") == 3, "the field")
    assert scylla.count(table) == everything and record_count(stack.bootstrap, dead) == 0
    cluster.shutdown()


def columns_of(session: Any, table: str) -> set[str]:
    keyspace, name = table.split(".")
    query = "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s"
    return {row.column_name for row in session.execute(query, (keyspace, name))}


class HazelcastPersister:
    """The Hazelcast persister's command and settings, and a client reading a ringbuffer back."""

    argv = (str(BIN / "fluxgate-hazelcast-persister"),)
    env_prefix = "FLUXGATE_HZ_"

    def __init__(self, address: str, cluster: str) -> None:
        self.address, self.cluster = address, cluster
        self.client = HazelcastClient(cluster_members=[address], cluster_name=cluster, cluster_connect_timeout=30)

    def env(self) -> dict[str, str]:
        return {"HAZELCAST__MEMBERS": json.dumps([self.address]), "HAZELCAST__CLUSTER_NAME": self.cluster}

    def values(self, name: str) -> list[dict[str, Any]]:
        ringbuffer = self.client.get_ringbuffer(name).blocking()
        size = ringbuffer.size()
        found = ringbuffer.read_many(0, 0, size) if size else []
        return [json.loads(value.to_string()) for value in found]

    def close(self) -> None:
        self.client.shutdown()
