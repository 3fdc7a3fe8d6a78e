"""One SparkSession for the whole run; each test gets its own topics and checkpoint."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from fluxgate_testing import consume, unique_topic
from spark_class_archive import optimising_compiler

from fluxgate_aggregator.contracts import load_contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.job import start
from fluxgate_aggregator.losses import KafkaWatermarks, LossWatch
from fluxgate_aggregator.progress import ProgressListener
from fluxgate_aggregator.query_supervisor import Supervisor
from fluxgate_aggregator.settings import AggregatorSettings, SparkSettings, WindowSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder
from fluxgate_core.settings import KafkaSettings, RegistrySettings


@dataclass(frozen=True)
class Topics:
    input: str
    output: str
    deadletter: str
    late: str


@pytest.fixture(scope="session")
def spark(stack: Any) -> Iterator[Any]:
    # The Spark lane runs every test of this folder on this session, minutes of micro-batches:
    # the optimising compiler took 289 and 299 s and 327 and 359 CPU-s of its tests, the quick
    # tier 330 and 345 s and 382 and 400 CPU-s (bench/results/2026-12-01-suite-end-of-run-waits.md).
    with optimising_compiler():
        session = build_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def spark_cache_cleared(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the session, nothing it cached stays: a job's ledger keeps its
    live entries and device table cached until its query starts again (the service's process
    ends with its job), and neither a stopped query nor ``SparkRouter`` drops them. Kept, they
    filled the one driver's 1 GiB heap over a worker's Spark tests (with the broadcasts their
    plans hold), until full collections took most of its time: one test took 78 s instead of
    18, and in a fresh clone one ran past its 300 s."""
    yield
    if "spark" in request.fixturenames:
        request.getfixturevalue("spark").catalog.clearCache()


@pytest.fixture
def topics(stack: Any) -> Topics:
    return Topics(*(unique_topic(f"agg.{name}", stack.bootstrap) for name in ("in", "out", "dlq", "late")))


@pytest.fixture
def settings_for(stack: Any, topics: Topics, tmp_path: Path) -> Callable[..., AggregatorSettings]:
    def make(window: WindowSettings, **overrides: Any) -> AggregatorSettings:
        return AggregatorSettings(
            kafka=KafkaSettings(bootstrap_servers=stack.bootstrap),
            registry=RegistrySettings(url=stack.registry_url),
            spark=SparkSettings(master="local[2]", shuffle_partitions=2, trigger_interval="1 second"),
            window=window,
            input_topic=topics.input,
            output_topic=topics.output,
            deadletter_topic=topics.deadletter,
            late_topic=topics.late,
            checkpoint_dir=str(tmp_path / "checkpoints"),
            **overrides,
        )

    return make


class RunningJob:
    """The job's two queries in the shared session, supervised as ``fluxgate-aggregator run``
    supervises them: a background thread ticks the supervisor, which resumes failed queries."""

    def __init__(self, spark: Any, settings: AggregatorSettings, registry: Any) -> None:
        self.spark = spark
        self.watermarks = KafkaWatermarks(settings)
        self.state = JobState(losses=LossWatch(self.watermarks, settings.data_loss_alert_seconds))
        self.listener = ProgressListener(self.state)
        spark.streams.addListener(self.listener)
        contracts = load_contracts(registry, settings.input_topic, settings.output_topic, "BACKWARD")
        start(spark, settings, contracts, self.state)
        self.supervisor = Supervisor(settings, self.state)
        self.gave_up = False
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._supervise, name="supervisor", daemon=True)
        self._ticker.start()

    def _supervise(self) -> None:
        self.gave_up = not self.supervisor.run(self._stop, interval_s=0.5)

    def wait_for_watermark(self, at_least_ms: int, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while (self.state.watermark_ms or 0) < at_least_ms:
            self.assert_running()
            assert time.monotonic() < deadline, f"watermark stuck at {self.state.watermark_ms}, want {at_least_ms}"
            time.sleep(0.2)

    def assert_running(self) -> None:
        """After the supervisor's turn every query is active: a failure it cannot resume shows here."""
        assert not self.gave_up, f"the supervisor gave up after {self.supervisor.restarts} restarts"
        assert self.supervisor.tick(), f"the supervisor gives up after {self.supervisor.restarts} restarts"
        for query in self.state.queries:
            assert query.isActive, f"query {query.name} stopped: {query.exception()}"

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._ticker.join()
        for query in self.state.queries:
            query.stop()
        self.spark.streams.removeListener(self.listener)
        self.watermarks.close()


@pytest.fixture
def run_job(spark: Any, registry_client: Any) -> Iterator[Callable[[AggregatorSettings], RunningJob]]:
    jobs: list[RunningJob] = []

    def launch(settings: AggregatorSettings, registry: Any = None) -> RunningJob:
        jobs.append(RunningJob(spark, settings, registry or registry_client))
        return jobs[-1]

    yield launch
    for job in jobs:
        if not job.stopped:
            job.stop()


class Devices:
    """Produces SensorReadings to the input topic exactly as the gateways do (wire format, keyed)."""

    def __init__(self, stack: Any, registry: Any, topic: str) -> None:
        self.topic = topic
        self.encoder = AvroEncoder.registered(registry, topic, schema_text(SENSOR_READING), schema_dict(SENSOR_READING))
        self.producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})

    def send(self, readings: Iterable[dict[str, Any]]) -> list[bytes]:
        values = []
        for record in readings:
            value = self.encoder.encode(record)
            self.producer.produce(self.topic, key=record["device_id"].encode(), value=value)
            values.append(value)
        self.send_raw([])
        return values

    def send_raw(self, values: Iterable[bytes], key: bytes = b"broken") -> None:
        for value in values:
            self.producer.produce(self.topic, key=key, value=value)
        assert self.producer.flush(10) == 0


@pytest.fixture
def devices(stack: Any, registry_client: Any, topics: Topics) -> Devices:
    return Devices(stack, registry_client, topics.input)


@pytest.fixture
def read_aggregates(stack: Any, registry_client: Any) -> Callable[..., list[ConsumedRecord]]:
    """Decoded TemperatureAggregates of a topic, once ``expected`` arrived and the topic went quiet."""
    decoder = AvroDecoder(registry_client, schema_dict(TEMPERATURE_AGGREGATE))

    def read(topic: str, expected: int, timeout: float = 120.0) -> list[ConsumedRecord]:
        return consume(stack.bootstrap, topic, expected=expected, timeout=timeout, decoder=decoder)

    return read


@pytest.fixture
def job_env(stack: Any, topics: Any, tmp_path: Path) -> dict[str, str]:
    """The job as a process of its own (``fluxgate-aggregator run``) on this test's topics."""
    return {
        "FLUXGATE_AGG_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
        "FLUXGATE_AGG_REGISTRY__URL": stack.registry_url,
        "FLUXGATE_AGG_INPUT_TOPIC": topics.input,
        "FLUXGATE_AGG_OUTPUT_TOPIC": topics.output,
        "FLUXGATE_AGG_DEADLETTER_TOPIC": topics.deadletter,
        "FLUXGATE_AGG_LATE_TOPIC": topics.late,
        "FLUXGATE_AGG_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "FLUXGATE_AGG_SPARK__MASTER": "local[2]",
        "FLUXGATE_AGG_SPARK__SHUFFLE_PARTITIONS": "2",
        "FLUXGATE_AGG_SPARK__TRIGGER_INTERVAL": "1 second",
        "FLUXGATE_AGG_WINDOW__SIZE": "10 seconds",
        "FLUXGATE_AGG_WINDOW__WATERMARK": "5 seconds",
        "FLUXGATE_AGG_HTTP__HOST": "127.0.0.1",
    }
