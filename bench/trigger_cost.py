"""What one micro-batch of the aggregator costs whatever its size (issue #40): the per-trigger
fixed cost, the cost per reading above it, and the close → output latency they allow.

The real job (``job.start``, trigger ``0 seconds``: batches back to back) reads a fresh topic
while a spawned process (``kstreams.latency.pace``, as ``bench/aggregator.py``'s paced legs)
sends wall-clock-stamped readings from ``--devices`` devices at each of ``--rates`` in turn,
``--seconds`` each, on a topic and checkpoint of its own. Two comparators run the same way on
``--comparator-rates`` (``--comparator-seconds`` each):

* ``count``: a ``foreachBatch`` that does nothing but ``batch.count()`` on the same Kafka
  source: Spark's own floor for a Kafka micro-batch with a Python round trip;
* ``aggregate``: ``job.aggregate`` (Spark's stateful operators, no Python in the batch) into
  the ``noop`` sink.

Last, at ``--realtime-rates``, the job's stateless part (decode, dead letter or output topic)
runs in Spark 4.1's real-time mode (Kafka to Kafka, ``--realtime-checkpoint``), and the
delay from each reading's send to its copy on the output topic is reported (p50, p99, max).

Per leg, over its batches with input but the first ``--skip`` (they pay for code generation,
connections and the first ledger entry): batches, median and
p90 ``triggerExecution`` and ``addBatch`` (the ``foreachBatch`` or the sink), median rows per
batch, Spark jobs per batch (every job of the query carries its run id as job group; for
the ``foreachBatch`` legs also counted per batch around the function), the driver's phase
times (``fluxgate_aggregator_phase_seconds``, read before and after the leg) and the CPU of
Spark's JVM and this driver per reading and per batch (which a busy machine does not inflate
as it does wall time).

The fixed cost is the median batch at the lowest rate; the slope a least-squares fit of batch
duration against rows per batch over every steady job batch. With back-to-back batches of
``D`` s, the reading that closes a window lands on average half a batch before the next batch
starts, which then takes ``D``: close → output is ``D (1 + q)`` at quantile ``q`` (p50 1.5 D,
p99 1.99 D), and at a rate ``r`` a batch holds ``r D`` readings, so ``D = fixed / (1 - slope * r)``.
Results: ``bench-results/trigger_cost.json`` (and ``.md``, ``.png``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from _common import CpuSampler, LegResult, micros_per, print_table, spark_conf, stack_up, write_report
from aggregator import fresh_job_settings, pace_in_child
from confluent_kafka.schema_registry import SchemaRegistryClient
from kstreams.latency import Paced, TopicWatch
from kstreams.peer import percentile
from prometheus_client import REGISTRY
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark idiom
from pyspark.sql.streaming.query import StreamingQuery

import fluxgate_aggregator.job as job_module
from fluxgate_aggregator.contracts import Contracts, load_contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.job import aggregate, kafka_options, read_decoded, read_framed, start
from fluxgate_aggregator.progress import ProgressListener
from fluxgate_aggregator.settings import AggregatorSettings, SparkSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_aggregator.wire import framed, with_reading
from fluxgate_stack import Endpoints

PARTITIONS = 3
REALTIME_PARTITIONS = 2  # one long-running task per partition, each holding one of local[2]'s slots
VARIANTS = ("job", "count", "aggregate")
PHASES = ("read", "ledger", "late", "write", "commit")
PHASE_METRIC = "fluxgate_aggregator_phase_seconds"
GOAL_P99_S = 2.0  # issue #40: window close -> aggregate on the output topic, at 10,000 readings/s
GOAL_RATE = 10_000.0


# --- the arithmetic (pure) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """``seconds = intercept + slope * rows``: a batch's duration against its size."""

    intercept: float
    slope: float


def fit_line(points: Sequence[tuple[float, float]]) -> Line:
    """Least squares of y on x; a flat line through the mean when x does not vary."""
    if not points:
        raise ValueError("no points to fit")
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return Line(mean_y, 0.0)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return Line(mean_y - slope * mean_x, slope)


def steady_batch_seconds(fixed_s: float, slope_s_per_row: float, rate: float) -> float | None:
    """Back to back, a batch holds the readings that came during the one before: ``D = fixed +
    slope * rate * D``, so ``D = fixed / (1 - slope * rate)``; None when a reading costs more
    than its share of time (``slope * rate >= 1``: the job falls behind without bound)."""
    load = slope_s_per_row * rate
    return fixed_s / (1 - load) if load < 1 else None


def close_to_output(batch_s: float, quantile: float) -> float:
    """Seconds from a window's close to its aggregate at ``quantile`` (0.5, 0.99), batches of
    ``batch_s`` back to back: the closing reading waits for the batch running when it comes
    to end (uniform over one batch), then for the next batch, whole."""
    return batch_s * (1 + quantile)


def median_of(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def p90_of(values: Sequence[float]) -> float:
    return percentile(sorted(values), 90) if values else 0.0


def phase_deltas(
    before: Mapping[str, tuple[float, float]], after: Mapping[str, tuple[float, float]]
) -> dict[str, dict[str, float]]:
    """Per phase, from a Summary's (sum, count) before and after: the seconds and calls in
    between and the mean milliseconds of a call (0 when it was not called)."""
    out = {}
    for phase, (sum_after, count_after) in after.items():
        sum_before, count_before = before.get(phase, (0.0, 0.0))
        seconds, calls = sum_after - sum_before, count_after - count_before
        out[phase] = {
            "seconds": round(seconds, 3),
            "calls": int(calls),
            "mean_ms": round(seconds / calls * 1000, 1) if calls else 0.0,
        }
    return out


def steady_batches(batches: Sequence[Batch], skip: int) -> list[Batch]:
    """The batches with input but the first ``skip`` of them. Every later one counts, those
    after the readings stopped too: a batch's duration against its size is what is fitted."""
    return [b for b in batches if b.rows > 0][skip:]


# --- one leg -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """One micro-batch as its progress event tells it; ``jobs`` counted around the
    ``foreachBatch`` function (None when the leg has none)."""

    batch_id: int
    started: float  # epoch s
    rows: int
    trigger_s: float
    add_batch_s: float
    jobs: int | None = None


@dataclass
class Leg:
    variant: str
    rate: float
    paced: Paced
    batches: list[Batch]
    query_jobs: int  # every job of the query's run (its job group)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    cpu_s: float = 0.0
    skip: int = 0

    @property
    def steady(self) -> list[Batch]:
        return steady_batches(self.batches, self.skip)

    @property
    def name(self) -> str:
        return f"{self.variant} {self.rate:,.0f}/s"

    @property
    def batches_in_pace(self) -> float:
        """Batches' worth of time while the readings were sent (the CPU is sampled over that
        span): each batch counted for the share of it inside the span."""
        start, end = self.paced.start, self.paced.end
        return sum(
            max(0.0, min(end, b.started + b.trigger_s) - max(start, b.started)) / b.trigger_s
            for b in self.batches
            if b.trigger_s > 0
        )

    def summary(self) -> dict[str, Any]:
        steady = self.steady
        with_input = [b for b in self.batches if b.rows > 0]
        counted = [b.jobs for b in steady if b.jobs is not None]
        return {
            "variant": self.variant,
            "target_rate": self.rate,
            "sent_per_second": round(self.paced.rate),
            "batches": len(self.batches),
            "batches_with_input": len(with_input),
            "read": sum(b.rows for b in self.batches),
            "unread_at_stop": self.paced.sent - sum(b.rows for b in self.batches),
            "steady_batches": len(steady),
            "median_trigger_s": round(median_of([b.trigger_s for b in steady]), 3),
            "p90_trigger_s": round(p90_of([b.trigger_s for b in steady]), 3),
            "median_add_batch_s": round(median_of([b.add_batch_s for b in steady]), 3),
            "p90_add_batch_s": round(p90_of([b.add_batch_s for b in steady]), 3),
            "median_rows": round(median_of([b.rows for b in steady])),
            "jobs_per_batch_median": median_of(counted) if counted else None,
            "jobs_per_batch_max": max(counted) if counted else None,
            "query_jobs_per_batch": round(self.query_jobs / len(self.batches), 2) if self.batches else None,
            "cpu_us_per_reading": micros_per(self.cpu_s, self.paced.sent),
            "cpu_cores": round(self.cpu_s / (self.paced.end - self.paced.start), 2),
            # CPU of one batch whatever its wall time: the fixed cost a busy machine cannot inflate.
            "cpu_s_per_batch": round(self.cpu_s / paced_batches, 2)
            if (paced_batches := self.batches_in_pace)
            else None,
            "phases": self.phases,
        }


def started_at(progress: Any) -> float:
    return datetime.fromisoformat(progress.timestamp).timestamp()


def as_batch(progress: Any, jobs: Mapping[int, int]) -> Batch:
    durations = progress.durationMs or {}
    return Batch(
        progress.batchId,
        started_at(progress),
        progress.numInputRows,
        durations.get("triggerExecution", 0) / 1000,
        durations.get("addBatch", 0) / 1000,
        jobs.get(progress.batchId),
    )


class JobCounter:
    """Spark jobs each ``foreachBatch`` call runs. Streaming sets the query's run id as the job
    group of its thread, and PySpark runs the function's calls into the JVM on that thread, so
    the group's job ids before and after a call are that batch's jobs (adaptive execution's
    stages included: each is a job of its own)."""

    def __init__(self, spark: SparkSession) -> None:
        self._context = spark.sparkContext
        self._tracker = spark.sparkContext.statusTracker()
        self.per_batch: dict[int, int] = {}

    def wrap(self, function: Callable[[DataFrame, int], None]) -> Callable[[DataFrame, int], None]:
        def counted(batch: DataFrame, batch_id: int) -> None:
            group = self._context.getLocalProperty("spark.jobGroup.id")
            before = set(self._tracker.getJobIdsForGroup(group))
            try:
                function(batch, batch_id)
            finally:
                self.per_batch[batch_id] = len(set(self._tracker.getJobIdsForGroup(group)) - before)

        return counted

    def of_run(self, query: StreamingQuery) -> int:
        return len(self._tracker.getJobIdsForGroup(str(query.runId)))


@contextmanager
def counting_router(counter: JobCounter) -> Iterator[None]:
    """``job.start`` with its own ``router`` wrapped by ``counter``: the real job, counted."""
    original = job_module.router  # type: ignore[attr-defined]  # imported there, not exported

    def wrapped(*args: Any, **kwargs: Any) -> Callable[[DataFrame, int], None]:
        return counter.wrap(original(*args, **kwargs))

    job_module.router = wrapped  # type: ignore[attr-defined]
    try:
        yield
    finally:
        job_module.router = original  # type: ignore[attr-defined]


def phase_totals() -> dict[str, tuple[float, float]]:
    """The job's phase Summary as it stands: (sum, count) per phase."""
    totals = {}
    for phase in PHASES:
        labels = {"phase": phase}
        total = REGISTRY.get_sample_value(f"{PHASE_METRIC}_sum", labels) or 0.0
        calls = REGISTRY.get_sample_value(f"{PHASE_METRIC}_count", labels) or 0.0
        totals[phase] = (total, calls)
    return totals


def start_variant(
    variant: str, spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, counter: JobCounter
) -> StreamingQuery:
    if variant == "job":
        state = JobState()
        with counting_router(counter):
            start(spark, settings, contracts, state)
        return state.queries[0]
    checkpoint = str(Path(settings.checkpoint_dir) / variant)
    if variant == "count":

        def only_count(batch: DataFrame, _: int) -> None:
            batch.count()

        writer = read_framed(spark, settings).writeStream.foreachBatch(counter.wrap(only_count))
    else:
        frames = aggregate(read_decoded(spark, settings, contracts), settings, contracts)
        writer = frames.writeStream.format("noop").outputMode("append")
    return (
        writer.queryName(f"trigger-cost-{variant}")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )


def run_leg(
    variant: str, rate: float, spark: SparkSession, args: argparse.Namespace, endpoints: Endpoints,
    client: SchemaRegistryClient, tmp: Path, pids: list[int],
) -> Leg:  # fmt: skip
    """One variant at one rate on topics of its own: pace, let the query catch up, stop it."""
    settings = leg_settings(args, endpoints, tmp / f"{variant}-{rate:g}")
    contracts = load_contracts(client, settings.input_topic, settings.output_topic, "BACKWARD")
    counter = JobCounter(spark)
    query = start_variant(variant, spark, settings, contracts, counter)
    phases_before = phase_totals()
    try:
        with CpuSampler(pids) as sampler, ProcessPoolExecutor(1, get_context("spawn")) as pool:
            job = (endpoints.bootstrap, endpoints.registry_url, settings.input_topic, args.devices)
            span = args.seconds if variant == "job" else args.comparator_seconds
            paced = pool.submit(pace_in_child, *job, rate, span).result()
        caught_up(query, paced.sent, args.catch_up)
        cpu = sampler.used(paced.start, paced.end)
    finally:
        query.stop()
    error = query.exception()
    if error is not None:
        raise SystemExit(f"{variant} at {rate:g}/s failed: {error}")
    batches = [as_batch(p, counter.per_batch) for p in query.recentProgress]
    phases = phase_deltas(phases_before, phase_totals()) if variant == "job" else {}
    return Leg(variant, rate, paced, batches, counter.of_run(query), phases, cpu, args.skip)


def caught_up(query: StreamingQuery, sent: int, timeout: float) -> None:
    """Wait until the query has read every reading sent (or ``timeout`` s passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and query.isActive:
        if sum(p.numInputRows for p in query.recentProgress) >= sent:
            return
        time.sleep(0.2)


def leg_settings(
    args: argparse.Namespace, endpoints: Endpoints, checkpoint: Path, partitions: int = PARTITIONS
) -> AggregatorSettings:
    """Fresh topics in and out; the job's defaults but the trigger (back to back) and the
    master; ``max_offsets_per_trigger`` left at its cap, far above any batch here."""
    spark = SparkSettings(master=args.master, shuffle_partitions=args.shuffle_partitions,
                          trigger_interval="0 seconds")  # fmt: skip
    return fresh_job_settings(endpoints, spark, checkpoint, "bench.trigger.", partitions)


# --- real-time mode: the stateless routing alone -------------------------------------------------


def delay_figures(arrivals: Sequence[tuple[float, float]], after: float) -> dict[str, float | int | None]:
    """p50, p99 and max seconds of send -> output topic, over the records that arrived of
    those sent at ``after`` (epoch s) or later; ``arrivals`` holds (sent, arrived) pairs."""
    ordered = sorted(arrived - sent for sent, arrived in arrivals if sent >= after)
    if not ordered:
        return {"records": 0, "p50_s": None, "p99_s": None, "max_s": None}
    return {
        "records": len(ordered),
        "p50_s": round(percentile(ordered, 50), 3),
        "p99_s": round(percentile(ordered, 99), 3),
        "max_s": round(ordered[-1], 3),
    }


@dataclass
class Delays(TopicWatch):
    """When each reading was sent (its event time: the pacer stamps the wall clock) and when
    its copy arrived on ``topic``."""

    arrivals: list[tuple[float, float]] = field(default_factory=list)

    def arrived(self, record: dict[str, Any], now: float) -> None:
        self.arrivals.append((_epoch_s(record["event_time"]), now))


def _epoch_s(value: Any) -> float:
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value) / 1000


def run_realtime(
    rate: float, spark: SparkSession, args: argparse.Namespace, endpoints: Endpoints,
    client: SchemaRegistryClient, tmp: Path, pids: list[int],
) -> dict[str, Any]:  # fmt: skip
    """The job's stateless part in real-time mode: read, decode (the job's own Catalyst
    decoding), route each record to the output or the dead-letter topic, Kafka sink; no
    ledger, no windows (real-time mode in 4.1 runs stateless queries only, and no
    ``foreachBatch``). Its tasks are long-running, one per input partition, so the topic has
    as many partitions as ``local[2]`` has task slots. PySpark 4.1 has no ``realTime``
    argument to ``trigger()``: the JVM's ``Trigger.RealTime`` is set on the Java writer."""
    settings = leg_settings(args, endpoints, tmp / f"realtime-{rate:g}", partitions=REALTIME_PARTITIONS)
    contracts = load_contracts(client, settings.input_topic, settings.output_topic, "BACKWARD")
    # The job's source but for maxOffsetsPerTrigger, which real-time mode refuses (it reads
    # without batch bounds); decoded as the job decodes.
    raw = (
        spark.readStream.format("kafka")
        .options(**kafka_options(settings))
        .option("subscribe", settings.input_topic)
        .option("startingOffsets", settings.starting_offsets)
        .load()
    )
    dead = F.col("reading").isNull()
    routed = with_reading(framed(raw), contracts.writers, contracts.reader).select(
        F.when(dead, F.lit(settings.deadletter_topic)).otherwise(F.lit(settings.output_topic)).alias("topic"),
        "key",
        "value",
    )
    writer = (
        routed.writeStream.queryName("trigger-cost-realtime")
        .format("kafka")
        .options(**kafka_options(settings))
        .option("checkpointLocation", str(Path(settings.checkpoint_dir) / "realtime"))
        .outputMode("update")
    )
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    trigger = jvm.org.apache.spark.sql.streaming.Trigger.RealTime(args.realtime_checkpoint)
    writer._jwrite = writer._jwrite.trigger(trigger)
    delays = Delays(endpoints.bootstrap, settings.output_topic, REALTIME_PARTITIONS, client).start()
    query = writer.start()
    try:
        with CpuSampler(pids) as sampler, ProcessPoolExecutor(1, get_context("spawn")) as pool:
            job = (endpoints.bootstrap, endpoints.registry_url, settings.input_topic, args.devices)
            paced = pool.submit(pace_in_child, *job, rate, args.comparator_seconds).result()
        time.sleep(5)  # the last readings' way out
        cpu = sampler.used(paced.start, paced.end)
    finally:
        query.stop()
        delays.stop()
    error = query.exception()
    if error is not None:
        raise SystemExit(f"real-time mode at {rate:g}/s failed: {error}")
    figures = {
        "target_rate": rate,
        "sent": paced.sent,
        "sent_per_second": round(paced.rate),
        "checkpoint_interval": args.realtime_checkpoint,
        "skipped_s": args.skip_seconds,
        "cpu_us_per_reading": micros_per(cpu, paced.sent),
        "cpu_cores": round(cpu / (paced.end - paced.start), 2),
    }
    return figures | delay_figures(delays.arrivals, paced.start + args.skip_seconds)


# --- the run -----------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="20,1000,5000,10000", help="readings/s of the job's legs, in order")
    parser.add_argument("--comparator-rates", default="20,10000", help="readings/s of the comparators' legs")
    parser.add_argument("--comparators", nargs="*", choices=VARIANTS[1:], default=list(VARIANTS[1:]))
    parser.add_argument("--realtime-rates", default="10000", help="readings/s of the real-time legs ('': none)")
    parser.add_argument("--skip-seconds", type=float, default=10.0, help="real-time legs: first seconds not counted")
    # 5 s is the shortest Spark allows: how often progress is committed, not a latency target.
    parser.add_argument("--realtime-checkpoint", default="5 seconds", help="real-time mode's batch duration")
    parser.add_argument("--seconds", type=float, default=50.0, help="paced seconds per leg of the job")
    parser.add_argument("--comparator-seconds", type=float, default=30.0, help="paced seconds per comparator leg")
    parser.add_argument("--skip", type=int, default=1, help="first batches with input of each leg not counted")
    parser.add_argument("--catch-up", type=float, default=30.0, help="s a query may take to read the rest")
    parser.add_argument("--devices", type=int, default=1000, help="distinct device ids")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    parser.add_argument("--shuffle-partitions", type=int, default=SparkSettings().shuffle_partitions)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for every leg (repeatable)")  # fmt: skip
    return parser.parse_args()


def rates_of(text: str) -> list[float]:
    return [float(rate) for rate in text.split(",") if rate.strip()]


def plan(args: argparse.Namespace) -> list[tuple[str, float]]:
    """The job at every rate, then each comparator at its rates."""
    legs = [("job", rate) for rate in rates_of(args.rates)]
    return legs + [(variant, rate) for variant in args.comparators for rate in rates_of(args.comparator_rates)]


def main() -> int:
    args = parse_args()
    endpoints = stack_up()
    client = SchemaRegistryClient({"url": endpoints.registry_url})
    spark = build_session(
        SparkSettings(
            master=args.master,
            shuffle_partitions=args.shuffle_partitions,
            # Enough progress events for a whole leg of short batches (Spark keeps 100).
            conf={"spark.ui.showConsoleProgress": "false", "spark.sql.streaming.numRecentProgressUpdates": "2000"}
            | spark_conf(args.conf),
        )
    )
    jvm = spark.sparkContext._jvm  # the JVM's pid is only reachable through the gateway
    assert jvm is not None
    pids = [int(jvm.java.lang.ProcessHandle.current().pid()), os.getpid()]  # the driver runs foreachBatch
    listener = ProgressListener(JobState())  # the service's metrics, as bench/aggregator.py does
    spark.streams.addListener(listener)
    legs: list[Leg] = []
    realtime: list[dict[str, Any]] = []
    load = {"before": os.getloadavg()}
    try:
        with tempfile.TemporaryDirectory(prefix="fluxgate-bench-trigger-") as tmp:
            for variant, rate in plan(args):
                legs.append(run_leg(variant, rate, spark, args, endpoints, client, Path(tmp), pids))
                print(f"{legs[-1].name}: {legs[-1].summary()}", flush=True)
            for rate in rates_of(args.realtime_rates):
                realtime.append(run_realtime(rate, spark, args, endpoints, client, Path(tmp), pids))
                print(f"realtime {rate:,.0f}/s: {realtime[-1]}", flush=True)
    finally:
        spark.streams.removeListener(listener)
        spark.stop()
    load["after"] = os.getloadavg()
    report(legs, realtime, args, load)
    return 0


def floors(legs: Sequence[Leg]) -> dict[str, Any]:
    """Per variant: the fixed cost (median batch at its lowest rate), the fit of duration
    against rows over its steady batches, and the close → output that follows at 10,000/s."""
    out: dict[str, Any] = {}
    for variant in dict.fromkeys(leg.variant for leg in legs):
        mine = [leg for leg in legs if leg.variant == variant and leg.steady]
        if not mine:
            continue
        lowest = min(mine, key=lambda leg: leg.rate)
        fixed = median_of([b.trigger_s for b in lowest.steady])
        line = fit_line([(b.rows, b.trigger_s) for leg in mine for b in leg.steady])
        # A negative slope is noise between batches of like sizes: no reading makes a batch shorter.
        batch = steady_batch_seconds(fixed, max(line.slope, 0.0), GOAL_RATE)
        out[variant] = {
            "fixed_cost_s": round(fixed, 3),
            "fixed_cost_from_rate": lowest.rate,
            "fit_intercept_s": round(line.intercept, 3),
            "slope_us_per_reading": round(line.slope * 1e6, 2),
            "fixed_only_p50_s": round(close_to_output(fixed, 0.5), 2),
            "fixed_only_p99_s": round(close_to_output(fixed, 0.99), 2),
            "model_batch_s_at_10k": round(batch, 3) if batch is not None else None,
            "model_p50_s_at_10k": round(close_to_output(batch, 0.5), 2) if batch is not None else None,
            "model_p99_s_at_10k": round(close_to_output(batch, 0.99), 2) if batch is not None else None,
        }
        at_goal = [leg for leg in mine if leg.rate == GOAL_RATE]
        if at_goal:
            measured = median_of([b.trigger_s for b in at_goal[0].steady])
            out[variant]["measured_batch_s_at_10k"] = round(measured, 3)
            out[variant]["measured_batch_p99_s_at_10k"] = round(close_to_output(measured, 0.99), 2)
    return out


def report(
    legs: Sequence[Leg], realtime: Sequence[Mapping[str, Any]], args: argparse.Namespace,
    load: Mapping[str, tuple[float, ...]],
) -> None:  # fmt: skip
    header = ["leg", "sent/s", "batches", "med s", "p90 s", "addBatch s", "rows/batch", "jobs/batch", "CPU µs"]
    rows = []
    for leg in legs:
        s = leg.summary()
        jobs = s["jobs_per_batch_median"] if s["jobs_per_batch_median"] is not None else s["query_jobs_per_batch"]
        rows.append([leg.name, s["sent_per_second"], s["steady_batches"], s["median_trigger_s"], s["p90_trigger_s"],
                     s["median_add_batch_s"], s["median_rows"], jobs, s["cpu_us_per_reading"]])  # fmt: skip
    title = f"Per-trigger cost, Spark {args.master}, back-to-back triggers, {args.devices} devices"
    print_table(title, header, rows)
    found = floors(legs)
    for variant, figures in found.items():
        print(f"  {variant}: {figures}")
    for figures in realtime:
        print(f"  real-time mode, stateless routing: {figures}")
    ratios = {}
    if "job" in found and "count" in found:
        ratios["job_fixed_over_count_fixed"] = found["job"]["fixed_cost_s"] / max(found["count"]["fixed_cost_s"], 1e-3)
    if "job" in found:
        ratios["job_fixed_only_p99_over_goal_2s"] = found["job"]["fixed_only_p99_s"] / GOAL_P99_S
        if found["job"]["model_p99_s_at_10k"] is not None:
            ratios["job_model_p99_at_10k_over_goal_2s"] = found["job"]["model_p99_s_at_10k"] / GOAL_P99_S
    results = [
        LegResult(leg.variant, f"{leg.rate:,.0f}/s", leg.paced.rate, micros_per(leg.cpu_s, leg.paced.sent),
                  {key: value for key, value in leg.summary().items() if isinstance(value, int | float)})
        for leg in legs
    ]  # fmt: skip
    settings = {
        "master": args.master,
        "shuffle_partitions": args.shuffle_partitions,
        "devices": args.devices,
        "seconds_per_leg": {"job": args.seconds, "comparators": args.comparator_seconds},
        "skipped_batches": args.skip,
        "trigger": "0 seconds",
        "load_average_before": [round(x, 2) for x in load["before"]],
        "load_average_after": [round(x, 2) for x in load["after"]],
        "floors": found,
        "realtime_stateless_routing": list(realtime),
        "legs": [leg.summary() | {"batch_seconds": [round(b.trigger_s, 3) for b in leg.steady]} for leg in legs],
    }
    paths = write_report("trigger_cost", title, "reading", results, ratios, settings)
    print(f"written to {paths[0]}")


if __name__ == "__main__":
    sys.exit(main())
