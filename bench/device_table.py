"""What the aggregator's per-device state costs a micro-batch as the fleet grows (issue #36):
the ledger's device table (``ledger.py``, ``device_clocks.py``) against the devices it holds,
at a fixed batch size.

For each of ``--devices`` (a ledger of its own, in one local Spark session built as the
service builds it): the table is filled with that many devices, ``--fill-chunk`` readings a
batch, an hour of event time before the measured batches so their ledger entries have expired
by then, as in a fleet whose readings each leave the ledger after the window and the dedup
horizon. Then ``--batches`` batches of ``--batch`` readings from random devices run the
ledger's part of a micro-batch as ``micro_batch.router`` does, each phase timed:

* ``marks``: the batch's readings joined with their devices' watermarks (``Ledger.marks``),
  and those of the devices it met that had gone cold joined with their rows once they come
  back (``Ledger.recall``), as the router judges them again;
* ``record``: the batch's ledger entry written;
* ``learn``: the device table after the batch (``Ledger.learn``: learned, written, read back);
* ``moves``: the devices whose watermark moved, joined with the ledger's readings, as
  ``closed_windows`` joins them;
* ``commit``: the stale entries found and deleted, the meta written.

Every ``evict_every`` batches (the ledger's default, 8) the devices without readings in the
ledger go cold, the filling's devices among them. The first ``--skip`` batches pay for code
generation and that first eviction and are left out; ``--batches`` should be a multiple of
8, so that the measured ones pay their share of the evictions. Reported per point: the
median of each phase and of the whole, the mean of the whole (evictions included), and a
least-squares line of the mean batch against devices: its slope is what a million more
devices add to every batch, whatever it holds. No Kafka and no other server: the job's own state only. Results:
``bench-results/device_table.json``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from _common import print_table, write_results
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark idiom
from trigger_cost import fit_line, median_of

from fluxgate_aggregator.ledger import ROW_SCHEMA, Ledger
from fluxgate_aggregator.micro_batch import moved
from fluxgate_aggregator.settings import SparkSettings
from fluxgate_aggregator.spark import build_session

PHASES = ("marks", "record", "learn", "moves", "commit")
HOUR_MS = 3_600_000
START_MS = 1_800_000_000_000


@dataclass(frozen=True)
class Point:
    devices: int
    batches: list[dict[str, float]]  # phase -> seconds, per measured batch
    in_spark: int = 0  # rows of the device table in Spark after the last batch
    cold: int = 0  # rows of the driver's cold store then

    def medians(self) -> dict[str, float]:
        phases = {phase: median_of([batch[phase] for batch in self.batches]) for phase in PHASES}
        whole = [sum(batch[p] for p in PHASES) for batch in self.batches]
        return phases | {"batch": median_of(whole), "mean": sum(whole) / len(whole)}


def fill_chunks(devices: int, chunk: int) -> list[range]:
    """The device ids each filling batch sends for, every device once."""
    return [range(start, min(devices, start + chunk)) for start in range(0, devices, chunk)]


def per_million(points: Sequence[Point]) -> float | None:
    """Seconds a million more devices add to a batch: the slope of the mean batch against
    devices (None with fewer than two sizes)."""
    if len({point.devices for point in points}) < 2:
        return None
    line = fit_line([(point.devices, point.medians()["mean"]) for point in points])
    return line.slope * 1_000_000


class LedgerRun:
    """One ledger in a folder of its own, run batch after batch as the router runs it."""

    def __init__(
        self, spark: SparkSession, folder: str, delay_ms: int, horizon_ms: int, evict_at_least: int | None = None
    ) -> None:
        self.spark, self.horizon_ms = spark, horizon_ms
        self.ledger = Ledger(spark, folder, delay_ms=delay_ms)
        if evict_at_least is not None:
            self.ledger.evict_at_least = evict_at_least
        self.batch_id = 0

    def batch(self, devices: Sequence[int] | range, at_ms: int, rng: random.Random) -> dict[str, float]:
        times: dict[str, float] = {}
        started = time.perf_counter()
        ledger = self.ledger
        ledger.prepare(self.batch_id)
        marks = ledger.marks()  # the watermarks at the batch's start, used throughout, as the router does
        rows = [
            (f"dev-{d:08d}", datetime.fromtimestamp((at_ms - rng.randint(0, 5_000)) / 1000, UTC), 20.0, None, "Cel",
             True, at_ms, at_ms)
            for d in devices
        ]  # fmt: skip
        frame = self.spark.createDataFrame(rows, ROW_SCHEMA).persist()
        plain = frame.select("device_id", "event_time", F.timestamp_millis("arrived_ms").alias("ingest_time"))
        readings = plain.join(marks, "device_id", "left").persist()
        unmarked = readings.agg(F.collect_set(F.when(F.col("mark_ms").isNull(), F.col("device_id")))).first()
        back = ledger.recall(unmarked[0]) if unmarked is not None and unmarked[0] else None
        if back is not None:  # the recalled devices' readings judged again (micro_batch.with_recalled)
            back = F.broadcast(back.withColumnRenamed("mark_ms", "back_ms"))
            judged = readings.join(back, "device_id", "left").select(
                "device_id", "event_time", "ingest_time", F.coalesce("back_ms", "mark_ms").alias("mark_ms")
            )
            judged.persist().count()
            readings.unpersist()
            readings, marks = judged, ledger.marks()
        started = _lap(times, "marks", started)
        ledger.record(frame, at_ms, len(rows))
        started = _lap(times, "record", started)
        after = ledger.learn(readings, at_ms)
        started = _lap(times, "learn", started)
        ledger.rows(this_batch=True).join(moved(marks, after, ledger), "device_id").count()
        started = _lap(times, "moves", started)
        ledger.commit(marks, self.horizon_ms)
        _lap(times, "commit", started)
        readings.unpersist()
        self.batch_id += 1
        return times


def _lap(times: dict[str, float], phase: str, started: float) -> float:
    now = time.perf_counter()
    times[phase] = now - started
    return now


def run_point(spark: SparkSession, args: argparse.Namespace, devices: int, rng: random.Random) -> Point:
    with tempfile.TemporaryDirectory(prefix="device-table-") as folder:  # a million devices' ledger: gone after
        run = LedgerRun(spark, f"{folder}/ledger", args.delay_ms, args.horizon_ms, args.evict_at_least)
        return _measured(run, args, devices, rng)


def _measured(run: LedgerRun, args: argparse.Namespace, devices: int, rng: random.Random) -> Point:
    for chunk in fill_chunks(devices, args.fill_chunk):
        run.batch(chunk, START_MS + run.batch_id * 1_000, rng)
    measured = []
    for index in range(args.skip + args.batches):
        at_ms = START_MS + HOUR_MS + index * 1_000
        times = run.batch(rng.sample(range(devices), min(args.batch, devices)), at_ms, rng)
        if index >= args.skip:
            measured.append(times)
        print(f"  {devices:,} devices, batch {index}: {sum(times.values()):.2f} s", flush=True)
    return Point(devices, measured, run.ledger.devices().count(), run.ledger.cold_devices)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="10000,100000,300000,1000000")
    parser.add_argument("--batch", type=int, default=400, help="readings per measured batch")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--skip", type=int, default=8)
    parser.add_argument("--fill-chunk", type=int, default=200_000)
    parser.add_argument("--delay-ms", type=int, default=30_000)
    parser.add_argument("--horizon-ms", type=int, default=60_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--evict-at-least", type=int, default=None, help="quiet devices before they go cold (default: the ledger's)"
    )
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    spark = build_session(SparkSettings())
    rng = random.Random(args.seed)
    points = [run_point(spark, args, int(n), rng) for n in args.devices.split(",")]
    spark.stop()
    rows = [
        [f"{p.devices:,}", *(p.medians()[name] for name in (*PHASES, "batch", "mean")), p.in_spark, p.cold]
        for p in points
    ]
    print_table(
        f"The ledger's part of a batch of {args.batch} readings (median s; mean: every batch, evictions included)",
        ["devices", *PHASES, "batch", "mean", "in Spark", "cold"],
        rows,
    )
    slope = per_million(points)
    print(f"\na million more devices add {slope:.2f} s to every batch" if slope is not None else "")
    path = write_results(
        "device_table",
        {
            "settings": vars(args),
            "points": [
                {
                    "devices": p.devices,
                    "median_s": p.medians(),
                    "batches": p.batches,
                    "in_spark": p.in_spark,
                    "cold": p.cold,
                }
                for p in points
            ],
            "seconds_per_million_devices": slope,
        },
    )
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
