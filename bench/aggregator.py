"""Readings/s of the aggregator's Spark job next to Spark's in-memory ``rate-micro-batch`` source
running the same aggregation, in one SparkSession and one run.

Every leg sees the same readings (``_readings.Readings``: device ``d<i % devices>``,
temperature ``15 + (i % 200) / 10``, event times spread evenly over ``--span-minutes``) in
micro-batches of ``--batch`` rows:

* ``rate``: ``rate-micro-batch`` rows turned into readings, then the job's own ``aggregate()``
  (windows, then Avro encoding of the aggregates) into Spark's ``noop`` sink;
* ``kafka``: Kafka, wire-format decode, the same ``aggregate()`` (Spark's stateful
  operators), wire-format encode, Kafka: the aggregation alone, as the job ran it before v3;
* ``job``: the job as ``fluxgate-aggregator run`` starts it (``job.start``): its one query
  reads and decodes each record once and routes it (aggregates, late readings, dead
  letters) against one watermark, with its own window state (the ledger);
* ``kstreams``: the engine our users would pick instead, a Kafka Streams application
  (``bench/kstreams``, its own JVM) on the same topic: 1-minute windows, 30 s grace, emitted
  on close, copies dropped by identity in a RocksDB window store, Welford's statistics.

``job`` and ``kstreams`` take turns ``--rounds`` times (job, kstreams, job, ...). Each reports
CPU per reading, readings/s and peak memory (VmHWM, reset before the leg: Spark's JVM plus
this driver for ``job``; the peer's JVM for ``kstreams``); the ratios job/kstreams are of the
medians over the rounds. Then ``--sweep-batches`` runs the job twice more per batch size
(``sweep-<rows>-<turn>``), and a line through every warm job leg splits its CPU (net of its
JIT) into a cost per batch and a cost per reading; that cost per reading is also given
against the peer's. Every leg's windows are checked against the first job leg's: the same
windows with equal count, min, max, mean and stddev.

A short rate run first warms the JVM up. Each leg's rate is the rows of its aggregating
query over the wall time of its batches after the first (which pays for code generation and
connections); CPU is the Spark JVM's and this driver's over that same time.
``--latency-seconds`` adds a paced leg per engine: readings stamped with the wall clock at
``--latency-rate``/s, and the time from a window's close (its end plus the 30 s grace, in
wall time) to its aggregate on the output topic. Results: ``bench-results/aggregator.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from _common import CpuSampler, LegResult, micros_per, print_table, spark_conf, stack_up, write_report
from _readings import Readings, as_readings, count_records, produce_in_child
from confluent_kafka.schema_registry import SchemaRegistryClient
from fluxgate_testing import unique_topic
from kstreams.latency import Arrivals, Paced, latencies, pace
from kstreams.peer import (
    PeerLeg,
    PeerProcess,
    build_jar,
    compare_windows,
    peak_rss_mib,
    read_topic,
    reset_peak_rss,
    run_peer_leg,
    windows_of,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark idiom
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.streaming.query import StreamingQuery

from fluxgate_aggregator.contracts import Contracts, load_contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.job import aggregate, kafka_options, read_decoded, start
from fluxgate_aggregator.progress import ProgressListener
from fluxgate_aggregator.settings import AggregatorSettings, SparkSettings, WindowSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_core.serde import AvroDecoder
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_stack import Endpoints

PARTITIONS = 3
LEGS = ("floor", "rate", "kafka", "job", "kstreams")
ALTERNATED = ("job", "kstreams")
SWEEP = "sweep"  # the job again, in batches of another size (--sweep-batches)
# Stopping the endless rate source interrupts the batch it is running; these log that as a
# failure (a warning with a stack trace, an error), which says nothing about the results.
INTERRUPTED_LOGGERS = ("org.apache.hadoop.util.Shell", "org.apache.spark.broadcast.TorrentBroadcast")


@dataclass
class Leg:
    """One measured query: its micro-batches' progress, the wall time around it, and CPU."""

    name: str
    what: str
    progress: list[Any]
    wall: float
    steady_cpu: float = 0.0
    steady_jit: float = 0.0  # of steady_cpu, the Spark JVM's JIT compiler threads'
    peak_mib: float = 0.0
    jvm_peak_mib: float = 0.0  # the Spark JVM's share of peak_mib; the rest is this driver's
    code: dict[str, float] = field(default_factory=dict)  # CodeCost.since over the leg
    output_topic: str = ""

    @property
    def batches(self) -> list[Any]:
        return [p for p in self.progress if p.numInputRows > 0]

    @property
    def steady(self) -> list[Any]:
        """Every batch with input but the first (all of them if there is only one)."""
        return self.batches[1:] if len(self.batches) > 1 else self.batches

    @property
    def steady_span(self) -> tuple[float, float]:
        """Epoch seconds from the end of the first batch to the end of the last one."""
        batches = self.batches
        begin = _ended(batches[0]) if len(batches) > 1 else _started(batches[0])
        return begin, _ended(batches[-1])

    @property
    def rows(self) -> int:
        return sum(p.numInputRows for p in self.batches)

    @property
    def steady_rows(self) -> int:
        return sum(p.numInputRows for p in self.steady)

    @property
    def per_second(self) -> float:
        begin, end = self.steady_span
        return self.steady_rows / (end - begin) if end > begin else 0.0


def _started(progress: Any) -> float:
    return datetime.fromisoformat(progress.timestamp).timestamp()


def _ended(progress: Any) -> float:
    return _started(progress) + float(progress.durationMs["triggerExecution"]) / 1000


# --- legs --------------------------------------------------------------------------------------


def run_rate(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, readings: Readings) -> Leg:
    rate = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", str(settings.spark.max_offsets_per_trigger))
        .option("numPartitions", str(PARTITIONS))
        .load()
    )
    started = time.perf_counter()
    query = (
        aggregate(rate_readings(rate, readings), settings, contracts)
        .writeStream.queryName("bench-rate")
        .format("noop")
        .outputMode("append")
        .option("checkpointLocation", str(Path(settings.checkpoint_dir) / "rate"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    # An endless source: stop once it has generated as many rows as the Kafka legs read.
    while sum(p.numInputRows for p in query.recentProgress) < readings.count:
        _check_active(query)
        time.sleep(0.05)
    query.stop()
    wall = time.perf_counter() - started
    return Leg("rate", "rate-micro-batch -> aggregate() -> noop", _upto(query.recentProgress, readings.count), wall)


def rate_readings(rate: DataFrame, readings: Readings) -> DataFrame:
    """``as_readings`` plus the ``sequence`` the job's identity of a reading includes (null) and
    the ``ingest_time`` its lateness rule reads (50 ms after the event), as the Kafka legs'
    readings have them."""
    reading = as_readings(rate, readings)
    ingest = F.timestamp_millis(F.unix_millis("reading.event_time") + 50).alias("ingest_time")
    sequence = F.lit(None).cast("long").alias("sequence")
    return reading.select(F.struct("reading.*", ingest, sequence).alias("reading"))


def _upto(progress: list[Any], count: int) -> list[Any]:
    """The batches that generated the first ``count`` rows (the source may have run one more)."""
    kept, rows = [], 0
    for item in progress:
        if rows >= count:
            break
        kept.append(item)
        rows += item.numInputRows
    return kept


def run_kafka(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts) -> Leg:
    """The aggregates query as ``job.starters`` builds it, but alone and with an availableNow trigger."""
    writer = (
        aggregate(read_decoded(spark, settings, contracts), settings, contracts)
        .writeStream.queryName("bench-kafka")
        .format("kafka")
        .options(**kafka_options(settings))
        .option("topic", settings.output_topic)
        .option("checkpointLocation", str(Path(settings.checkpoint_dir) / "aggregates"))
        .outputMode("append")
    )
    return _drained("kafka", "Kafka -> decode -> aggregate() -> encode -> Kafka", writer)


def run_floor(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts) -> Leg:
    """The least any Spark job on this topic spends: the Kafka source and the wire-format
    decode into Spark's ``noop`` sink, nothing kept and nothing written."""
    writer = (
        read_decoded(spark, settings, contracts)
        .writeStream.queryName("bench-floor")
        .format("noop")
        .option("checkpointLocation", str(Path(settings.checkpoint_dir) / "floor"))
    )
    return _drained("floor", "Kafka -> decode -> noop: the Spark floor", writer)


def _drained(name: str, what: str, writer: DataStreamWriter) -> Leg:
    """``writer``'s query run over everything in the topic (availableNow), timed from its start."""
    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    _check_failed(query)
    return Leg(name, what, list(query.recentProgress), time.perf_counter() - started)


def run_job(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts) -> Leg:
    """``job.start``, until its query has processed everything in the topic."""
    state = JobState()
    listener = ProgressListener(state)  # its metrics, as in the service
    spark.streams.addListener(listener)
    started = time.perf_counter()
    try:
        start(spark, settings, contracts, state)
        for query in state.queries:
            query.processAllAvailable()
            _check_failed(query)
        wall = time.perf_counter() - started
    finally:
        for query in state.queries:
            query.stop()
        spark.streams.removeListener(listener)
    aggregates = next(q for q in state.queries if q.name == "aggregates")
    return Leg("job", "job.start(): one query, read and decoded once, routed", list(aggregates.recentProgress), wall)


def _check_active(query: StreamingQuery) -> None:
    if not query.isActive:
        _check_failed(query)
        raise SystemExit(f"query {query.name} stopped early")


def _check_failed(query: StreamingQuery) -> None:
    error = query.exception()
    if error is not None:
        raise SystemExit(f"query {query.name} failed: {error}")


# --- the run -----------------------------------------------------------------------------------


def main() -> int:
    args = parse_args()
    endpoints = stack_up()
    readings = Readings(args.readings, args.devices, args.span_minutes * 60_000)
    if "kstreams" in args.legs:
        build_jar()  # before any leg: a cold Maven cache takes minutes, which no leg should pay
    with tempfile.TemporaryDirectory(prefix="fluxgate-bench-agg-") as tmp:
        legs, produced, windows, paced, idle_mib = run_legs(args, endpoints, readings, Path(tmp))
    report(legs, produced, windows, paced, idle_mib, args)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readings", type=int, default=1_000_000, help="rows per leg (default: 1000000)")
    parser.add_argument("--batch", type=int, default=100_000, help="rows per micro-batch in every leg")
    parser.add_argument("--warm-up", type=int, default=200_000, help="rows of the unmeasured rate run first")
    parser.add_argument("--devices", type=int, default=1000, help="distinct device ids")
    parser.add_argument("--span-minutes", type=int, default=5, help="event time the readings cover")
    parser.add_argument("--shuffle-partitions", type=int, default=SparkSettings().shuffle_partitions)
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    parser.add_argument("--legs", nargs="+", choices=LEGS, default=list(LEGS), help="which legs, in order")
    parser.add_argument("--rounds", type=int, default=2, help="turns of job and kstreams, alternated")
    parser.add_argument("--sweep-batches", type=int, nargs="*", default=[50_000, 200_000, 500_000], metavar="ROWS",
                        help="after the turns, two job legs in batches of each size: the job's CPU split into a cost"
                        " per batch and a cost per reading (none: no sweep)")  # fmt: skip
    parser.add_argument("--peer-threads", type=int, default=2, help="the peer's stream threads (Spark: local[2])")
    parser.add_argument("--latency-seconds", type=float, default=150.0, help="paced leg per engine (0: none)")
    parser.add_argument("--latency-rate", type=float, default=10_000.0, help="readings/s of the paced legs")
    parser.add_argument("--latency-trigger", default=SparkSettings().trigger_interval, help="the job's, paced")
    parser.add_argument("--latency-settle", type=float, default=20.0, help="s before windows count as closed")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the job (repeatable), e.g. spark.driver.memory=512m")  # fmt: skip
    args = parser.parse_args()
    if problem := latency_span_problem(args.latency_seconds, args.latency_settle):
        parser.error(problem)
    return args


def latency_span_problem(span: float, settle: float) -> str | None:
    """Why a paced span this short measures nothing, or None. A window close falls inside the
    span only if it outlasts the settling time plus a window and its grace: shorter, whether
    any close is caught depends on the wall clock, and an engine can report 0 of 0 windows."""
    window = WindowSettings()  # the window the paced legs run (latency_settings leaves it as is)
    shortest = settle + seconds(window.size) + seconds(window.watermark)
    if 0 < span < shortest:
        return (
            f"--latency-seconds {span:g} is shorter than --latency-settle + a window + its grace"
            f" ({shortest:g} s): no window close is sure to fall inside it"
        )
    return None


def leg_names(legs: list[str], rounds: int, sweep: Sequence[int] = ()) -> list[str]:
    """Each leg once in the order given, but ``job`` and ``kstreams`` take turns ``rounds``
    times after the others (``job-1``, ``kstreams-1``, ``job-2``, ... when more than one),
    and then, with ``job``, two ``sweep-<rows>-<turn>`` legs per batch size of ``sweep``: the
    first at a size makes code of its own (a size changes how many ledger entries a batch
    reads)."""
    names = [leg for leg in legs if leg not in ALTERNATED]
    alternated = [leg for leg in legs if leg in ALTERNATED]
    for turn in range(1, rounds + 1):
        names += [f"{leg}-{turn}" if rounds > 1 else leg for leg in alternated]
    return names + ([f"{SWEEP}-{rows}-{turn}" for rows in sweep for turn in (1, 2)] if "job" in legs else [])


def kind(name: str) -> str:
    return name.split("-")[0]


AnyLeg = Leg | PeerLeg


def run_legs(
    args: argparse.Namespace, endpoints: Endpoints, readings: Readings, tmp: Path
) -> tuple[list[AnyLeg], dict[str, Any], dict[str, Any], dict[str, Any], float]:
    spark_settings = SparkSettings(
        master=args.master,
        shuffle_partitions=args.shuffle_partitions,
        trigger_interval="0 seconds",  # back to back: the job's 5 s pause would only add idle time
        max_offsets_per_trigger=args.batch,
        # recentProgress is what the legs read their batches from: keep every batch of a leg.
        conf={"spark.ui.showConsoleProgress": "false", "spark.sql.streaming.numRecentProgressUpdates": "10000"}
        | spark_conf(args.conf),
    )
    client = SchemaRegistryClient({"url": endpoints.registry_url})
    spark = build_session(spark_settings)
    jvm = spark.sparkContext._jvm  # the JVM's pid and log4j are only reachable through the gateway
    assert jvm is not None
    log4j = jvm.org.apache.logging.log4j
    for name in INTERRUPTED_LOGGERS:
        log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    # This driver too: the job's foreachBatch runs Python here.
    pids = [int(jvm.java.lang.ProcessHandle.current().pid()), os.getpid()]
    # The memory of a session that has done nothing yet: under any job's peak.
    idle_mib = peak_rss_mib(pids)
    legs: list[AnyLeg] = []
    produced: dict[str, Any] = {}
    expected_windows: int | None = None
    try:
        for name, settings in leg_settings(args, endpoints, spark_settings, tmp):
            if kind(name) != "rate" and not produced:
                produced = produce_in_child(endpoints.bootstrap, endpoints.registry_url, settings.input_topic, readings)
            if kind(name) == "kstreams":
                peer = PeerProcess(endpoints.bootstrap, endpoints.registry_url, settings.input_topic,
                                   settings.output_topic, Path(settings.checkpoint_dir), args.peer_threads)  # fmt: skip
                legs.append(run_peer_leg(name, peer, readings.count, args.batch, expected_windows))
                print(f"{name}: {legs[-1].per_second:,.0f} rows/s", flush=True)
                continue
            contracts = load_contracts(client, settings.input_topic, settings.output_topic, "BACKWARD")
            if name == "warm-up":
                run_rate(spark, settings, contracts, replace(readings, count=min(args.warm_up, readings.count)))
                continue
            reset_peak_rss(pids)
            code = CodeCost(jvm)
            with CpuSampler(pids, jit=pids[:1]) as sampler:
                leg = run_leg(kind(name), spark, settings, contracts, readings)
            leg.code = code.since()
            leg.name, leg.steady_cpu, leg.peak_mib = name, sampler.used(*leg.steady_span), peak_rss_mib(pids)
            leg.steady_jit = sampler.jit_used(*leg.steady_span)
            leg.jvm_peak_mib = peak_rss_mib(pids[:1])
            if kind(name) not in ("rate", "floor"):  # the floor writes nothing
                leg.output_topic = settings.output_topic
            if kind(name) == "job" and expected_windows is None:
                expected_windows = count_records(endpoints.bootstrap, settings.output_topic, PARTITIONS)
            legs.append(leg)
            print(f"{name}: {leg.per_second:,.0f} rows/s", flush=True)
        paced = {}
        for engine in [kind for kind in ALTERNATED if kind in args.legs] if args.latency_seconds > 0 else []:
            paced[engine] = run_latency(engine, spark, args, endpoints, client, tmp, pids)
            print(f"latency {engine}: {paced[engine]}", flush=True)
    finally:
        spark.stop()
    return legs, produced, check_windows(legs, endpoints.bootstrap, client), paced, idle_mib


def run_latency(
    engine: str, spark: SparkSession, args: argparse.Namespace, endpoints: Endpoints, client: SchemaRegistryClient,
    tmp: Path, pids: list[int],
) -> dict[str, Any]:  # fmt: skip
    """One engine on readings paced at ``--latency-rate``: close → output topic, CPU per reading
    and peak memory over the paced span. The pacer runs in a process of its own, so this
    driver's CPU (part of the job's) does not include it."""
    settings = latency_settings(args, endpoints, tmp / f"latency-{engine}")
    arrivals = Arrivals(endpoints.bootstrap, settings.output_topic, PARTITIONS, client).start()
    state, peer = JobState(), None
    if engine == "job":
        contracts = load_contracts(client, settings.input_topic, settings.output_topic, "BACKWARD")
        start(spark, settings, contracts, state)
        measured = pids
    else:
        peer = PeerProcess(endpoints.bootstrap, endpoints.registry_url, settings.input_topic, settings.output_topic,
                           Path(settings.checkpoint_dir), args.peer_threads).start()  # fmt: skip
        measured = [peer.pid]
    code = CodeCost(spark.sparkContext._jvm) if engine == "job" else None
    try:
        reset_peak_rss(measured)
        with CpuSampler(measured) as sampler, ProcessPoolExecutor(1, get_context("spawn")) as pool:
            job = (endpoints.bootstrap, endpoints.registry_url, settings.input_topic, args.devices)
            paced = pool.submit(pace_in_child, *job, args.latency_rate, args.latency_seconds).result()
        time.sleep(30 + seconds(args.latency_trigger))  # stragglers count, with their real delay
        peak = peak_rss_mib(measured)
        batches = batch_figures([p for query in state.queries for p in query.recentProgress])
    finally:
        for query in state.queries:
            query.stop()
        if peer is not None:
            peer.stop()
        arrivals.stop()
    window = settings.window
    figures = latencies(arrivals.seen, paced, seconds(window.size) * 1000, seconds(window.watermark) * 1000,
                        args.latency_settle, args.devices)  # fmt: skip
    cpu = micros_per(sampler.used(paced.start, paced.end), paced.sent)
    return {"readings_per_second": round(paced.rate), "sent": paced.sent, "cpu_us_per_reading": cpu,
            "peak_mib": peak} | batches | (code.since() if code else {}) | figures  # fmt: skip


def batch_figures(progress: list[Any]) -> dict[str, Any]:
    """The job's batches over a paced leg (none for the peer): how many, how many readings they
    read (against ``sent``: short means the job had not caught up when the leg ended), and
    their median and longest time, which a close waits on after its trigger."""
    if not progress:
        return {}
    took = sorted(p.durationMs.get("triggerExecution", 0) / 1000 for p in progress)
    return {
        "batches": len(progress),
        "read": sum(p.numInputRows for p in progress),
        "batch_p50_s": round(statistics.median(took), 3),
        "batch_max_s": round(took[-1], 3),
    }


def pace_in_child(bootstrap: str, registry_url: str, topic: str, devices: int, rate: float, span: float) -> Paced:
    return pace(bootstrap, SchemaRegistryClient({"url": registry_url}), topic, devices, rate, span)


def seconds(duration: str) -> int:
    """'30 seconds', '1 minute' -> seconds (the units the bench's settings use)."""
    number, unit = duration.split()
    return int(float(number) * (60 if unit.startswith("minute") else 1))


def latency_settings(args: argparse.Namespace, endpoints: Endpoints, checkpoint: Path) -> AggregatorSettings:
    """A topic of its own in and out; the job as the service runs it (its trigger, no cap)."""
    spark = SparkSettings(master=args.master, shuffle_partitions=args.shuffle_partitions,
                          trigger_interval=args.latency_trigger, conf=spark_conf(args.conf))  # fmt: skip
    return fresh_job_settings(endpoints, spark, checkpoint, "bench.agg.lat-")


def fresh_job_settings(
    endpoints: Endpoints, spark: SparkSettings, checkpoint: Path, prefix: str, partitions: int = PARTITIONS
) -> AggregatorSettings:
    """The job's defaults on fresh topics (``<prefix>in``, ``out``, ``dlq``, ``late``) and a
    checkpoint of its own, read from the earliest offset, with ``spark`` as given."""
    topics = {kind: unique_topic(f"{prefix}{kind}", endpoints.bootstrap, partitions)
              for kind in ("in", "out", "dlq", "late")}  # fmt: skip
    return AggregatorSettings(
        kafka=KafkaSettings(bootstrap_servers=endpoints.bootstrap),
        registry=RegistrySettings(url=endpoints.registry_url),
        spark=spark,
        input_topic=topics["in"],
        output_topic=topics["out"],
        deadletter_topic=topics["dlq"],
        late_topic=topics["late"],
        starting_offsets="earliest",
        checkpoint_dir=str(checkpoint),
    )


def check_windows(legs: list[AnyLeg], bootstrap: str, client: SchemaRegistryClient) -> dict[str, Any]:
    """Each Kafka leg's windows against the first job leg's (the honest-comparison check)."""
    decoder = AvroDecoder(client)
    outputs = {leg.name: leg.output_topic for leg in legs if leg.output_topic}
    base = next((name for name in outputs if kind(name) == "job"), None)
    if base is None:
        return {}
    ours = windows_of(read_topic(bootstrap, outputs[base], PARTITIONS, decoder.decode))
    checks: dict[str, Any] = {"against": base}
    for name, topic in outputs.items():
        if name != base:
            checks[name] = compare_windows(ours, windows_of(read_topic(bootstrap, topic, PARTITIONS, decoder.decode)))
    return checks


class CodeCost:
    """Code the Spark JVM made while a leg ran: the classes Spark generated and compiled with
    Janino (a plan whose generated source differs from every cached one is compiled afresh,
    and a long literal is written into the source), and the time the JVM's JIT compilers spent
    on bytecode (every new class is compiled again once it runs hot)."""

    def __init__(self, jvm: Any) -> None:
        self._janino = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
        self._jit = jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
        self._start = self._now()

    def _now(self) -> tuple[int, int]:
        return int(self._janino.getCount()), int(self._jit.getTotalCompilationTime())

    def since(self) -> dict[str, float]:
        janino, jit_ms = self._now()
        return {"janino_compiles": janino - self._start[0], "jit_s": round((jit_ms - self._start[1]) / 1000, 1)}


def run_leg(
    name: str, spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, readings: Readings
) -> Leg:
    if name == "rate":
        return run_rate(spark, settings, contracts, readings)
    if name == "floor":
        return run_floor(spark, settings, contracts)
    leg = run_kafka(spark, settings, contracts) if name == "kafka" else run_job(spark, settings, contracts)
    leg.what += f"; {count_records(settings.kafka.bootstrap_servers, settings.output_topic, PARTITIONS)} aggregates out"
    return leg


def leg_settings(
    args: argparse.Namespace, endpoints: Endpoints, spark: SparkSettings, tmp: Path
) -> Iterator[tuple[str, AggregatorSettings]]:
    """Settings per leg: one input topic for all, output topics and a checkpoint of each leg's own."""
    input_topic = unique_topic("bench.agg.in", endpoints.bootstrap, PARTITIONS)
    names = leg_names(args.legs, args.rounds, args.sweep_batches)
    for name in ["warm-up", *names] if args.warm_up else names:
        # The peer stamps each aggregate with its window's event time (2023, FIRST_EVENT_MS): the
        # broker's retention would delete them before they are read back. Append time keeps them.
        stamped = {"message.timestamp.type": "LogAppendTime"} if kind(name) == "kstreams" else None
        topics = {
            topic: unique_topic(f"bench.agg.{topic}-{name}", endpoints.bootstrap, PARTITIONS, stamped)
            for topic in ("out", "dlq", "late")
        }
        yield (
            name,
            AggregatorSettings(
                kafka=KafkaSettings(bootstrap_servers=endpoints.bootstrap),
                registry=RegistrySettings(url=endpoints.registry_url),
                spark=sweep_batch(name, spark),
                input_topic=input_topic,
                output_topic=topics["out"],
                deadletter_topic=topics["dlq"],
                late_topic=topics["late"],
                starting_offsets="earliest",
                checkpoint_dir=str(tmp / name),
            ),
        )


def sweep_batch(name: str, spark: SparkSettings) -> SparkSettings:
    """A sweep leg's batches are its own size: ``sweep-<rows>-<turn>``."""
    if kind(name) != SWEEP:
        return spark
    return spark.model_copy(update={"max_offsets_per_trigger": int(name.split("-")[1])})


def leg_row(leg: AnyLeg) -> list[object]:
    """One leg in the printed table; the peer has no micro-batches: its start-up stands in
    the first batch's column."""
    if isinstance(leg, PeerLeg):
        batches, first = "-", leg.first_s
    else:
        batches, first = str(len(leg.batches)), leg.batches[0].durationMs["triggerExecution"] / 1000
    cpu, jit = micros_per(leg.steady_cpu, leg.steady_rows), micros_per(leg.steady_jit, leg.steady_rows)
    return [leg.name, leg.rows, batches, leg.per_second, cpu, jit, leg.peak_mib, first, leg.wall]


def report(
    legs: list[AnyLeg], produced: dict[str, Any], windows: dict[str, Any], paced: dict[str, Any],
    idle_mib: float, args: argparse.Namespace,
) -> None:  # fmt: skip
    header = ["leg", "rows", "batches", "rows/s", "CPU µs/row", "of it JIT", "peak MiB", "first batch s", "wall s"]
    title = (
        f"Spark {args.master}, {args.shuffle_partitions} shuffle partitions, "
        f"{args.batch} rows/batch, {args.devices} devices"
    )
    print_table(title, header, [leg_row(leg) for leg in legs])
    for leg in legs:
        print(f"  {leg.name}: {leg.what}" + (f"; code made: {leg.code}" if isinstance(leg, Leg) and leg.code else ""))
    for name, check in windows.items():
        if name != "against":
            print(f"  windows of {name} against {windows['against']}: {check}")
    for engine, figures in paced.items():
        print(f"  close -> output topic, {engine} at {args.latency_rate:,.0f} readings/s: {figures}")
    print(f"  an idle session (Spark's JVM and this driver, before any leg): {idle_mib:,.0f} MiB")
    per_batch = batch_cost(legs)
    if per_batch:
        print(
            f"  the job's CPU net of JIT: {per_batch['cpu_s_per_batch']:.2f} CPU-s a batch"
            f" + {per_batch['cpu_us_per_reading']:.2f} µs a reading, over {per_batch['points']}"
        )
    ratios = compare(legs) | job_over_kstreams(legs) | floor_over_kstreams(legs, idle_mib) | latency_ratio(paced)
    ratios |= reading_cost_over_kstreams(per_batch, legs)
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.2f}")
    results = [
        LegResult(
            "",
            leg.name,
            leg.per_second,
            micros_per(leg.steady_cpu, leg.steady_rows),
            {"rows": leg.rows, "wall_s": round(leg.wall, 2), "peak_mib": leg.peak_mib}
            | {"jit_cpu_us_per_row": micros_per(leg.steady_jit, leg.steady_rows)}
            | ({"jvm_peak_mib": leg.jvm_peak_mib} | leg.code if isinstance(leg, Leg) else {}),
        )
        for leg in legs
    ]
    settings = {
        "master": args.master,
        "shuffle_partitions": args.shuffle_partitions,
        "rows_per_batch": args.batch,
        "readings": args.readings,
        "devices": args.devices,
        "span_minutes": args.span_minutes,
        "rounds": args.rounds,
        "spark_conf": spark_conf(args.conf),
        "idle_session_mib": idle_mib,
        "input_produced_in": produced,
        "windows_checked": windows,
        "latency": {
            "rate": args.latency_rate,
            "seconds": args.latency_seconds,
            "job_trigger": args.latency_trigger,
            "settle_s": args.latency_settle,
            "legs": paced,
        },
        "what": {leg.name: leg.what for leg in legs},
        "batch_cost": per_batch,
    }
    paths = write_report("aggregator", title, "row", results, ratios, settings)
    path = paths[0]
    print(f"written to {path}")


def compare(legs: list[AnyLeg]) -> dict[str, float]:
    """Throughput and CPU per row of each Kafka leg relative to the rate leg."""
    by_name = {leg.name: leg for leg in legs}
    base = by_name.get("rate")
    if base is None or not base.per_second or not base.steady_cpu:
        return {}
    ratios = {}
    for leg in legs:
        if leg is not base:
            ratios[f"{leg.name}_throughput_over_rate"] = round(leg.per_second / base.per_second, 3)
            cpu = (leg.steady_cpu / leg.steady_rows) / (base.steady_cpu / base.steady_rows)
            ratios[f"{leg.name}_cpu_per_row_over_rate"] = round(cpu, 2)
    return ratios


def measured(legs: list[AnyLeg], *kinds: str) -> list[AnyLeg]:
    """The legs of these kinds that measured any steady rows."""
    return [leg for leg in legs if kind(leg.name) in kinds and leg.steady_rows]


def net_of_jit(leg: AnyLeg) -> float:
    """A leg's CPU-s a steady reading, less its JIT compilers'."""
    return (leg.steady_cpu - leg.steady_jit) / leg.steady_rows


def job_over_kstreams(legs: list[AnyLeg]) -> dict[str, float]:
    """Our job against the peer, each side's median over its rounds: CPU per reading and peak
    memory (above 1: we spend more), readings/s (below 1: we are slower). CPU also net of each
    JVM's JIT compilers: a leg of seconds still pays for compiling its code, which a job running
    for hours pays once, and the Spark JVM compiles far more code than the peer's."""
    jobs, peers = measured(legs, "job"), measured(legs, "kstreams")
    if not jobs or not peers:
        return {}

    def median(side: list[AnyLeg], figure: str) -> float:
        values = {
            "cpu": [leg.steady_cpu / leg.steady_rows for leg in side],
            "cpu_net_of_jit": [net_of_jit(leg) for leg in side],
            "memory": [leg.peak_mib for leg in side],
            "rate": [leg.per_second for leg in side],
        }[figure]
        return statistics.median(values)

    ratios = {}
    figures = (
        ("cpu", "cpu_per_reading"),
        ("cpu_net_of_jit", "cpu_per_reading_net_of_jit"),
        ("memory", "peak_memory"),
        ("rate", "readings_per_second"),
    )
    for figure, key in figures:
        theirs = median(peers, figure)
        ratios[f"job_over_kstreams_{key}"] = round(median(jobs, figure) / theirs, 3) if theirs else 0.0
    return ratios


def batch_cost(legs: list[AnyLeg]) -> dict[str, Any]:
    """The job's CPU net of its JIT as a line, ``CPU-s a batch = cpu_s_per_batch +
    cpu_us_per_reading * readings a batch``, through every warm job leg at its batches' mean
    size: each but the first at its size, which makes the code of that size's plans (Janino's
    compiling is not the JIT's). Empty when fewer than two sizes ran. A batch's cost is the
    same whatever it holds, so it weighs on a reading as the batches get smaller
    (bench/results/2026-12-02-aggregator-batch-size.md)."""
    jobs = [leg for leg in measured(legs, "job", SWEEP) if isinstance(leg, Leg)]
    points: list[tuple[float, float]] = []
    sizes: set[int] = set()
    for leg in jobs:
        rows = leg.steady_rows / len(leg.steady)
        if round(rows) in sizes:
            points.append((rows, net_of_jit(leg) * rows))
        sizes.add(round(rows))
    if len({round(rows) for rows, _ in points}) < 2:
        return {}
    slope, intercept = statistics.linear_regression([rows for rows, _ in points], [cpu for _, cpu in points])
    return {
        "cpu_s_per_batch": round(intercept, 3),
        "cpu_us_per_reading": round(slope * 1e6, 2),
        "points": [(round(rows), round(cpu, 3)) for rows, cpu in points],
    }


def reading_cost_over_kstreams(per_batch: dict[str, Any], legs: list[AnyLeg]) -> dict[str, float]:
    """The job's cost a reading above its batches' (:func:`batch_cost`) against the peer's
    whole CPU a reading, both net of their JIT (the peer's median over its rounds): what the
    job would spend against the peer if a batch cost nothing."""
    peers = measured(legs, "kstreams")
    if not per_batch or not peers:
        return {}
    theirs = statistics.median(net_of_jit(leg) for leg in peers) * 1e6
    return {"job_reading_cost_over_kstreams_net_of_jit": round(per_batch["cpu_us_per_reading"] / theirs, 3)}


def floor_over_kstreams(legs: list[AnyLeg], idle_mib: float) -> dict[str, float]:
    """What Spark spends before our job does anything, against the peer's median: the floor
    leg's CPU per reading and an idle session's memory. At 1 or above, a goal of spending no
    more than the peer is out of reach of any job on this Spark, whatever it computes."""
    floor = next((leg for leg in legs if leg.name == "floor" and leg.steady_rows), None)
    peers = measured(legs, "kstreams")
    if not peers:
        return {}
    ratios = {}
    if floor is not None:
        theirs = statistics.median(leg.steady_cpu / leg.steady_rows for leg in peers)
        ratios["floor_over_kstreams_cpu_per_reading"] = round(floor.steady_cpu / floor.steady_rows / theirs, 3)
    memory = statistics.median(leg.peak_mib for leg in peers)
    ratios["idle_session_over_kstreams_peak_memory"] = round(idle_mib / memory, 3)
    return ratios


def latency_ratio(paced: dict[str, Any]) -> dict[str, float]:
    """p99 close -> output of the job over the peer's, when both are finite (every window came)."""
    ours, theirs = (paced.get(engine, {}).get("p99_s") for engine in ALTERNATED)
    return {"job_over_kstreams_latency_p99": round(ours / theirs, 1)} if ours and theirs else {}


if __name__ == "__main__":
    sys.exit(main())
