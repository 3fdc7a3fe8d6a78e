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
  letters) against one watermark, with its own window state (the ledger).

A short rate run first warms the JVM up. Each leg's rate is the rows of its aggregating
query over the wall time of its batches after the first (which pays for code generation and
connections); CPU is the Spark JVM's and this driver's over that same time.
Results: ``bench-results/aggregator.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from _common import CpuSampler, LegResult, micros_per, print_table, stack_up, write_report
from _readings import Readings, as_readings, count_records, produce_input
from confluent_kafka.schema_registry import SchemaRegistryClient
from fluxgate_testing import unique_topic
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark idiom
from pyspark.sql.streaming.query import StreamingQuery

from fluxgate_aggregator.contracts import Contracts, load_contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.job import aggregate, kafka_options, read_decoded, start
from fluxgate_aggregator.progress import ProgressListener
from fluxgate_aggregator.settings import AggregatorSettings, SparkSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_stack import Endpoints

PARTITIONS = 3
LEGS = ("rate", "kafka", "job")
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

    def as_dict(self) -> dict[str, Any]:
        seconds = [round(p.durationMs["triggerExecution"] / 1000, 2) for p in self.batches]
        return {
            "what": self.what,
            "rows": self.rows,
            "batches": len(seconds),
            "rows_per_second": round(self.per_second),
            "cpu_us_per_row": micros_per(self.steady_cpu, self.steady_rows),
            "median_batch_rows_per_second": round(statistics.median(p.processedRowsPerSecond for p in self.steady)),
            "batch_seconds": seconds,
            "wall_seconds": round(self.wall, 2),
            "output_rows": sum(max(p.sink.numOutputRows, 0) for p in self.progress),
        }


def _started(progress: Any) -> float:
    return datetime.fromisoformat(progress.timestamp).timestamp()


def _ended(progress: Any) -> float:
    return _started(progress) + float(progress.durationMs["triggerExecution"]) / 1000


# --- legs --------------------------------------------------------------------------------------


def run_rate(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, readings: Readings) -> Leg:
    rate = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", str(settings.spark.max_offsets_per_trigger or readings.count))
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
    """``as_readings`` plus the ``sequence`` the job's identity of a reading includes (null, as
    the Kafka legs' readings have it)."""
    reading = as_readings(rate, readings)
    return reading.select(F.struct("reading.*", F.lit(None).cast("long").alias("sequence")).alias("reading"))


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
    started = time.perf_counter()
    query = (
        aggregate(read_decoded(spark, settings, contracts), settings, contracts)
        .writeStream.queryName("bench-kafka")
        .format("kafka")
        .options(**kafka_options(settings))
        .option("topic", settings.output_topic)
        .option("checkpointLocation", str(Path(settings.checkpoint_dir) / "aggregates"))
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    _check_failed(query)
    wall = time.perf_counter() - started
    return Leg("kafka", "Kafka -> decode -> aggregate() -> encode -> Kafka", list(query.recentProgress), wall)


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
    with tempfile.TemporaryDirectory(prefix="fluxgate-bench-agg-") as tmp:
        legs, produced = run_legs(args, endpoints, readings, Path(tmp))
    report(legs, produced, args)
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
    return parser.parse_args()


def run_legs(
    args: argparse.Namespace, endpoints: Endpoints, readings: Readings, tmp: Path
) -> tuple[list[Leg], dict[str, Any]]:
    spark_settings = SparkSettings(
        master=args.master,
        shuffle_partitions=args.shuffle_partitions,
        trigger_interval="0 seconds",  # back to back: the job's 5 s pause would only add idle time
        max_offsets_per_trigger=args.batch,
        conf={"spark.ui.showConsoleProgress": "false"},
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
    legs: list[Leg] = []
    produced: dict[str, Any] = {}
    try:
        for name, settings in leg_settings(args, endpoints, spark_settings, tmp):
            contracts = load_contracts(client, settings.input_topic, settings.output_topic, "BACKWARD")
            if name == "warm-up":
                run_rate(spark, settings, contracts, replace(readings, count=min(args.warm_up, readings.count)))
                continue
            if name != "rate" and not produced:
                produced = produce_input(endpoints.bootstrap, client, settings.input_topic, readings)
            with CpuSampler(pids) as sampler:
                leg = run_leg(name, spark, settings, contracts, readings)
            leg.steady_cpu = sampler.used(*leg.steady_span)
            legs.append(leg)
            print(f"{name}: {leg.per_second:,.0f} rows/s", flush=True)
    finally:
        spark.stop()
    return legs, produced


def run_leg(
    name: str, spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, readings: Readings
) -> Leg:
    if name == "rate":
        return run_rate(spark, settings, contracts, readings)
    leg = run_kafka(spark, settings, contracts) if name == "kafka" else run_job(spark, settings, contracts)
    leg.what += f"; {count_records(settings.kafka.bootstrap_servers, settings.output_topic, PARTITIONS)} aggregates out"
    return leg


def leg_settings(
    args: argparse.Namespace, endpoints: Endpoints, spark: SparkSettings, tmp: Path
) -> Iterator[tuple[str, AggregatorSettings]]:
    """Settings per leg: one input topic for all, output topics and a checkpoint of each leg's own."""
    input_topic = unique_topic("bench.agg.in", endpoints.bootstrap, PARTITIONS)
    for name in ["warm-up", *args.legs] if args.warm_up else args.legs:
        topics = {
            kind: unique_topic(f"bench.agg.{kind}-{name}", endpoints.bootstrap, PARTITIONS)
            for kind in ("out", "dlq", "late")
        }
        yield (
            name,
            AggregatorSettings(
                kafka=KafkaSettings(bootstrap_servers=endpoints.bootstrap),
                registry=RegistrySettings(url=endpoints.registry_url),
                spark=spark,
                input_topic=input_topic,
                output_topic=topics["out"],
                deadletter_topic=topics["dlq"],
                late_topic=topics["late"],
                starting_offsets="earliest",
                checkpoint_dir=str(tmp / name),
            ),
        )


def report(legs: list[Leg], produced: dict[str, Any], args: argparse.Namespace) -> None:
    header = ["leg", "rows", "batches", "rows/s", "CPU µs/row", "first batch s", "wall s"]
    rows = []
    for leg in legs:
        first = leg.batches[0].durationMs["triggerExecution"] / 1000
        rows.append(
            [
                leg.name,
                leg.rows,
                len(leg.batches),
                leg.per_second,
                micros_per(leg.steady_cpu, leg.steady_rows),
                first,
                leg.wall,
            ]
        )
    title = (
        f"Spark {args.master}, {args.shuffle_partitions} shuffle partitions, "
        f"{args.batch} rows/batch, {args.devices} devices"
    )
    print_table(title, header, rows)
    for leg in legs:
        print(f"  {leg.name}: {leg.what}")
    ratios = compare(legs)
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.2f}")
    results = [
        LegResult(
            "",
            leg.name,
            leg.per_second,
            micros_per(leg.steady_cpu, leg.steady_rows),
            {"rows": leg.rows, "batches": len(leg.batches), "wall_s": round(leg.wall, 2)},
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
        "input_produced_in": produced,
    }
    paths = write_report("aggregator", title, "row", results, ratios, settings)
    path = paths[0]
    print(f"written to {path}")


def compare(legs: list[Leg]) -> dict[str, float]:
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


if __name__ == "__main__":
    sys.exit(main())
