"""The job's routing (its real ``foreachBatch`` on Spark) decides every record's fate as the
plain-Python reference model does, batch after batch: dead letters, late readings written
once, every window aggregated once from the readings it counted, the watermark.

The named cases put readings at, just before and just after the watermark, in the batch
whose watermark closes their window, a late copy in the batch that closes its reading's
window, and a batch replayed after a crash; the property feeds both the same random batch
sequences (copies, late and broken records, readings on the watermark, empty batches,
crashes) and compares every batch."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pyspark.errors import utils as pyspark_errors
from pyspark.sql import functions as F
from routing_harness import Crash, SparkRouter, same
from routing_model import Broken, DeviceClockModel, Outputs, Reading, Record
from spark_class_archive import QUICK_JIT

from fluxgate_aggregator.settings import AggregatorSettings, WindowSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SIZE, DELAY = 10_000, 5_000


def settings(slide: str | None = None, dedup: str = "10 seconds") -> AggregatorSettings:
    window = WindowSettings(size="10 seconds", slide=slide, watermark="5 seconds", dedup_horizon=dedup)
    return AggregatorSettings(window=window, late_topic="late", deadletter_topic="dlq", output_topic="out")


@pytest.fixture
def pair(spark: Any, tmp_path: Path) -> Callable[..., tuple[DeviceClockModel, SparkRouter]]:
    def make(
        slide: str | None = None,
        dedup: str = "10 seconds",
        upgraded: frozenset[str] = frozenset(),
        evict_every: int | None = None,
    ) -> tuple[DeviceClockModel, SparkRouter]:
        job = SparkRouter(spark, settings(slide, dedup), tmp_path / f"job-{slide}-{dedup}", upgraded, evict_every)
        model = DeviceClockModel(SIZE, job.settings.window.slide_ms, DELAY, job.settings.window.dedup_horizon_ms)
        return model, job

    return make


def run(
    model: DeviceClockModel, job: SparkRouter, batch_id: int, records: list[Record], crash: str | None = None
) -> Outputs:
    """One batch through both; with ``crash`` the job dies "before" or "after" the ledger
    commits the batch, before Spark records it, and runs it again after a restart: the second
    run must decide and write what the first did."""
    expected = model.batch(records)
    if crash:
        job.crash_next_commit = crash
        with pytest.raises(Crash):
            job.batch(batch_id, records)
        job.restart()
    late_before = job.state.late_rows
    got = job.batch(batch_id, records)
    assert same(expected, got) == [], f"batch {batch_id} {records}"
    # What the job's metrics and console count as late is what it wrote to the late topic.
    assert job.state.late_rows - late_before == len(got.late), "the late readings counted are those written"
    return got


def phase_seconds(phase: str) -> float:
    return REGISTRY.get_sample_value("fluxgate_aggregator_phase_seconds_sum", {"phase": phase}) or 0.0


PHASES = ("read", "ledger", "late", "write", "commit")


def test_readings_around_the_watermark_and_window_ends(pair: Callable[..., Any]) -> None:
    timed_before = {phase: phase_seconds(phase) for phase in PHASES}
    model, job = pair()
    d1 = [Reading("d1", 20_000, 1.0, 1), Reading("d1", 25_000, 2.0, 2)]
    out = run(model, job, 0, d1)  # the first batch counts everything: the watermark starts at 0
    assert out.watermark_ms == 20_000 and out.aggregates == {}

    at, before, after = Reading("d1", 20_000, 3.0, 3), Reading("d1", 19_999, 4.0, 4), Reading("d1", 20_001, 5.0, 5)
    mover = Reading("d2", 35_000, 9.0, 1)  # moves the watermark to 30 000: [20 000, 30 000) closes
    broken = [Broken(b"not avro"), Broken(b"\x00\x00\x00\x00\x01\xff\xff")]
    out = run(model, job, 1, [at, before, after, mover, *broken])
    assert sorted(out.late) == sorted([at.identity, before.identity])  # at the watermark is late
    # Just after the watermark, counted in the batch whose watermark closes its window.
    assert out.aggregates[("d1", 20_000, 30_000)].count == 3
    assert sorted(out.dead) == sorted(b.value for b in broken)
    # Every phase of a batch is timed: these two batches went through each (late, closing a window).
    timed = {phase: phase_seconds(phase) - timed_before[phase] for phase in PHASES}
    assert all(seconds > 0 for seconds in timed.values()), timed

    copy_of_counted = Reading("d1", 25_000, 2.0, 2)  # behind, and known: not late, not counted again
    # Written late in the last batch, which started at 20 000: the watermark has moved the
    # horizon (10 000) on since it arrived, so the job lets it go (as Spark's
    # dropDuplicatesWithinWatermark) and the copy is written late again. Still never counted.
    old_copy_of_late = Reading("d1", 19_999, 4.0, 4)
    humidity = Reading("d1", 33_000, 50.0, 1, unit="%", metric="humidity")  # not the job's metric
    # A device new in this batch has no watermark yet: its first readings are counted, behind
    # the others' or not, and its windows the gateways' clock has passed close at once.
    first_of_d3 = Reading("d3", 29_999, 7.0, None)
    counted_twice = Reading("d2", 35_000, 9.0, 1)  # a copy of the mover, still after the watermark
    exactly_at_horizon = Reading("d1", 20_000, 3.0, 3)  # a copy of `at`, exactly 10 000 behind: let go too
    records = [copy_of_counted, old_copy_of_late, exactly_at_horizon, humidity, first_of_d3, counted_twice]
    out = run(model, job, 2, records)
    assert sorted(out.late) == sorted([old_copy_of_late.identity, exactly_at_horizon.identity])
    assert out.watermark_ms == 30_000 and out.aggregates[("d3", 20_000, 30_000)].count == 1

    # A copy of a counted reading arrives in the batch that closes that reading's window, with
    # a copy of d3's first reading, now behind d3's watermark: neither is written.
    late_copy, copy_of_first = Reading("d2", 35_000, 9.0, 1), Reading("d3", 29_999, 7.0, None)
    out = run(model, job, 3, [late_copy, copy_of_first, Reading("d3", 46_000, 8.0, None)])
    assert out.late == [] and out.aggregates[("d2", 30_000, 40_000)].count == 1

    # The job dies writing a batch that closes windows and has late readings; run again, the
    # batch decides the same and writes the same.
    replayed = [Reading("d1", 39_000, 6.0, 6), Reading("d3", 60_000, 1.5, None), Reading("d1", 50_500, 2.5, 7)]
    out = run(model, job, 4, replayed, crash="before")
    assert out.late == [replayed[0].identity] and ("d3", 40_000, 50_000) in out.aggregates


def test_a_copy_redelivered_after_an_outage_is_dropped_within_the_dedup_horizon(pair: Callable[..., Any]) -> None:
    # A gateway stopped for a minute: the broker redelivers what it had produced but not
    # acknowledged while other devices moved the watermark a minute on. Within the dedup
    # horizon the copy is known (counted once, not late); past it, it is written late.
    model, job = pair(dedup="1 minute")
    counted = [Reading("d1", 20_000, 1.0, 1), Reading("d1", 21_000, 2.0, 2)]
    run(model, job, 0, counted)
    out = run(model, job, 1, [Reading("d2", 75_000, 5.0, 1)])  # watermark 70 000: 49 s past the copies
    assert out.watermark_ms == 70_000 and out.aggregates[("d1", 20_000, 30_000)].count == 2
    out = run(model, job, 2, [counted[1], Reading("d2", 85_000, 6.0, 2)])  # redelivered, watermark 80 000
    assert out.late == [] and out.watermark_ms == 80_000
    out = run(model, job, 3, [counted[0], Reading("d2", 86_000, 6.5, 3)])  # 60 s behind now: let go
    assert out.late == [counted[0].identity]


def test_a_late_reading_is_remembered_from_its_arrival_not_its_event_time(pair: Callable[..., Any]) -> None:
    # Readings 75 s late when they arrive (older than the horizon in event time), then a copy
    # redelivered after a gateway's outage: one late record, not two, until the watermark has
    # moved the horizon on from the reading's arrival (or its copy's: a copy is remembered too).
    model, job = pair(dedup="1 minute")
    run(model, job, 0, [Reading("d2", 100_000, 1.0, 1), Reading("d1", 99_000, 0.5, 6)])  # watermark 95 000
    late, other = Reading("d1", 20_000, 2.0, 7), Reading("d1", 21_000, 2.5, 8)
    out = run(model, job, 1, [late, other, Reading("d2", 101_000, 1.5, 2)])
    assert sorted(out.late) == sorted([late.identity, other.identity]) and out.watermark_ms == 96_000
    run(model, job, 2, [Reading("d2", 145_000, 3.0, 3)])  # watermark 140 000
    out = run(model, job, 3, [late, Reading("d2", 161_000, 3.5, 4)])  # 45 s after its arrival: known
    assert out.late == [] and out.watermark_ms == 156_000
    out = run(model, job, 4, [late, other])  # 156 000 - 60 000 >= 95 000: `other` is let go
    assert out.late == [other.identity]


def test_a_counted_reading_its_batch_left_far_behind_is_known_to_its_copies(pair: Callable[..., Any]) -> None:
    # A new device's first batch counts a reading it buffered ten minutes, then its watermark
    # is ten minutes past it: kept by its arrival on the gateways' clock, its copy a batch
    # later is dropped, not written late; once that clock moved the horizon on, a copy is late.
    model, job = pair(dedup="1 minute")
    t0 = 1_000_000
    buffered = Reading("d1", t0 - 600_000, 19.0, 1, ingest_ms=t0 + 50)
    run(model, job, 0, [buffered, Reading("d1", t0, 20.0, 2, ingest_ms=t0 + 50)])
    out = run(model, job, 1, [buffered, Reading("d1", t0 + 5_000, 20.5, 3, ingest_ms=t0 + 5_050)])
    assert out.late == []
    run(model, job, 2, [Reading("d1", t0 + 70_000, 21.0, 4, ingest_ms=t0 + 70_050)])
    out = run(model, job, 3, [buffered, Reading("d1", t0 + 71_000, 21.0, 5, ingest_ms=t0 + 71_050)], crash="after")
    assert out.late == [buffered.identity]


def test_a_ledger_entry_keeps_no_broadcast_of_its_batch(pair: Callable[..., Any]) -> None:
    """A batch routes its readings against the device table's watermarks, which Spark
    broadcasts while the table is small. An entry cached as the batch's own frame kept that
    plan, and the broadcast with it, for the entry's life: one copy of the table per entry
    filled the driver's heap at 300,000 devices. Entries are read back from their files."""
    model, job = pair()
    for batch in range(3):
        run(model, job, batch, [Reading("d1", 20_000 + batch * SIZE, 1.0, batch), Reading("d2", 20_000, 2.0, batch)])
    plans = [frame._jdf.queryExecution().executedPlan().toString() for frame in job.ledger.cached.values()]
    assert plans and not [plan for plan in plans if "Broadcast" in plan], plans


def test_a_device_that_went_cold_is_judged_on_its_return_as_if_it_had_stayed(pair: Callable[..., Any]) -> None:
    """The ledger sends a device without readings in it to the cold store (here after every
    batch) and hands its row back when it sends again: its watermark, clock offset and floor
    are the ones it left with, so its readings fall as the model's, a restart in between
    included. d1's clock is 30 s behind the gateways': a reading it stamps 10 s after its
    last one is still counted, where a device without a row would count everything."""
    model, job = pair(evict_every=1)
    run(model, job, 0, [Reading("d1", 100_000, 20.0, 1, ingest_ms=130_000), Reading("d2", 130_000, 21.0, 1)])
    for batch_id in range(1, 8):  # d2 alone, the gateways' clock a window further each time
        now = 130_000 + batch_id * SIZE
        run(model, job, batch_id, [Reading("d2", now, 21.0, batch_id)])
    assert job.ledger.cold_files, "d1 went cold"
    assert "d1" not in {r["device_id"] for r in job.ledger.devices().collect()}
    mark = 130_000 + 7 * SIZE - 30_000 - DELAY  # d1's watermark followed the clock, 30 s behind it
    late, counted = Reading("d1", mark - 1_000, 20.5, 2), Reading("d1", mark + 1_000, 20.75, 3)
    got = run(model, job, 8, [late, counted, Reading("d2", 130_000 + 8 * SIZE, 21.0, 8)], crash="after")
    assert got.late == [late.identity], "judged against the watermark it left with, not as a new device"
    job.restart()  # the cold store read back from the checkpoint's files
    for batch_id in range(9, 12):  # d1 goes cold again, and comes back after a restart
        run(model, job, batch_id, [Reading("d2", 130_000 + batch_id * SIZE, 21.0, batch_id)])
    job.restart()
    run(model, job, 12, [Reading("d1", 130_000 + 12 * SIZE, 21.0, 4), Reading("d1", mark, 21.0, 5)])


def test_a_batch_like_the_ones_before_it_compiles_no_new_code(pair: Callable[..., Any], spark: Any) -> None:
    """Spark compiles the code it generates for a plan unless it kept a class for the same
    source. Each batch compiled ~135 classes anew, and the JVM's JIT compiled them again: most
    of the job's CPU. Two causes, each enough to fail this: Spark kept 100 classes, fewer than
    a batch uses (spark.DEFAULT_CONF), and the gateways' clock, written into the source as a
    literal, made 26 of them new in every batch (batch_values)."""
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    model, job = pair()
    made = []
    previous: list[Record] = []
    for batch in range(9):  # the first four or five make the code every later one uses
        now = 20_000 + batch * SIZE  # every batch closes a window and moves the gateways' clock
        records: list[Record] = [
            Reading("d1", now, 1.0 + batch, batch),
            Reading("d2", now - 1_000, 2.0, batch, ingest_ms=now + 500),  # a clock behind the gateways'
            Reading("d3", now - 4 * SIZE, 3.0, batch),  # late
            Broken(b"junk"),
            *previous[:1],  # a copy of a counted reading
        ]
        before = compiled.getCount()
        run(model, job, batch, records)
        made.append(compiled.getCount() - before)
        previous = records
    # Either cause costs every batch (26 or 133 classes): three batches of it are far above 10.
    # Once in a run (at a varying batch, 4 classes) Spark plans one query another way.
    assert sum(made[-3:]) < 10, f"classes compiled per batch: {made}"


def test_the_jvm_the_job_starts_collects_with_the_throughput_collector(spark: Any) -> None:
    """The session is built as the service builds it (spark.DEFAULT_CONF): the driver's JVM,
    where local mode runs every task, uses the parallel collector, not G1, with which the job
    spent a quarter more CPU per reading."""
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(bean.getName() for bean in beans) == ["PS MarkSweep", "PS Scavenge"]


def test_the_lanes_driver_compiles_with_the_optimising_compiler(spark: Any) -> None:
    """`make test` gives every local driver the JIT's quick tier, but the Spark lane's one
    session runs minutes of micro-batches, where the optimising compiler pays (conftest's
    ``optimising_compiler``); the class-data archive it keeps."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert QUICK_JIT not in arguments, arguments
    if QUICK_JIT in os.environ.get("SPARK_SUBMIT_OPTS", ""):  # under make test: the rest of it still applies
        assert any(argument.startswith("-XX:SharedArchiveFile=") for argument in arguments), arguments


def test_a_task_thread_pins_at_most_a_mebibyte_of_its_last_sort(spark: Any) -> None:
    """Since Spark 4.1 a sort keeps its sorter in a thread-local of its plan node, and the
    sorter's iterator still points at its last page once that page is freed: a task thread
    pins one page per sort whose plan is alive. Pages are 1 MiB in the job, not the 8 MiB
    Spark picks for its 1 GiB heap on 2 cores: at a million devices the pinned pages were
    178 MB of the live heap, and 13 MB with 1 MiB pages."""
    memory = spark.sparkContext._jvm.org.apache.spark.SparkEnv.get().memoryManager()
    assert memory.pageSizeBytes() == 1 << 20


def test_the_status_store_keeps_the_last_50_sql_executions(spark: Any) -> None:
    """Nothing reads the status store of a headless job, and each execution kept there holds
    its plan's text and metrics: 1,000 of them (Spark's default) were about 100 MB of the
    driver's heap in a long run. Spark trims the store behind the queries, asynchronously."""
    store = spark._jsparkSession.sharedState().statusStore()
    for _ in range(60):
        spark.range(1).count()
    deadline = time.monotonic() + 30
    while store.executionsCount() > 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert store.executionsCount() <= 50


def test_cached_batches_are_kept_as_plain_columns(spark: Any) -> None:
    """The job caches each reading twice and reads the ledger's entries in every batch:
    Spark's dictionary and run-length encoding of cached columns cost it about a tenth of its
    CPU per reading, for a cache 1.4 to 1.6 times smaller. 20,000 copies of one id would
    encode into a few bytes."""
    rows = 20_000
    frame = spark.range(rows).select(F.lit("device-0001").alias("device_id")).persist()
    try:
        frame.count()
        cached = sum(info.memSize() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo())
    finally:
        frame.unpersist(blocking=True)
    assert cached >= rows * len("device-0001")


def test_dataframe_calls_record_no_python_call_site(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark records the Python call site of every DataFrame and Column call in the JVM for
    its error messages, some 270 calls a batch of five or more gateway round trips each: off,
    the driver's CPU per batch fell from 0.31 to 0.13 s."""
    sites: list[int] = []
    capture = pyspark_errors._capture_call_site
    monkeypatch.setattr(pyspark_errors, "_capture_call_site", lambda depth: sites.append(depth) or capture(depth))
    spark.range(3).select((F.col("id") + 1).alias("next")).where(F.col("next") > 1).count()
    assert sites == []


def random_records(rng: random.Random, now: int, watermark: int, history: list[Reading]) -> list[Record]:
    records: list[Record] = []
    for _ in range(rng.randint(0, 9)):
        draw = rng.random()
        if draw < 0.08:
            # An id no version of the subject has is as broken as a body that does not decode.
            records.append(Broken(rng.choice([b"junk", b"\x00\x00\x00\x00\x01\x02", b"", b"\x00\x00\x00\x00\x09\x02"])))
        elif draw < 0.22 and history:
            records.append(rng.choice(history))  # a copy of an earlier reading, maybe of this batch
        else:
            if draw < 0.32:
                event = watermark + rng.choice([-1, 0, 1])
            elif draw < 0.45:
                event = now - rng.randint(DELAY, 4 * SIZE)  # behind the watermark, most likely
            else:
                event = now + rng.randint(-3_000, 1_000)
            metric = "humidity" if rng.random() < 0.05 else "temperature"
            sequence = rng.choice([None, rng.randint(0, 4)])
            reading = Reading(rng.choice(["d1", "d2", "d3"]), max(event, 1), rng.choice([20.0, 20.5, 21.25]), sequence)
            reading = Reading(reading.device_id, reading.event_ms, reading.value, reading.sequence, metric=metric)
            history.append(reading)
            records.append(reading)
    return records


@pytest.mark.parametrize(
    ("seed", "slide", "dedup", "upgraded"),
    [
        (1, None, "10 seconds", frozenset()),
        (3, "5 seconds", "25 seconds", frozenset()),
        # d2's gateway writes a SensorReading version registered after the job started.
        (5, None, "10 seconds", frozenset({"d2"})),
    ],
)
def test_the_job_decides_as_the_reference_model(
    pair: Callable[..., Any], seed: int, slide: str | None, dedup: str, upgraded: frozenset[str]
) -> None:
    rng = random.Random(seed)
    # Devices go cold and come back after every batch: the same decisions as the model's.
    model, job = pair(slide, dedup, upgraded, evict_every=1 if seed == 3 else None)
    now, history = 100_000, []
    for batch_id in range(10):
        records = random_records(rng, now, model.watermark_ms, history)
        crash = ("before", "after")[batch_id % 2] if rng.random() < 0.15 else None
        run(model, job, batch_id, records, crash)
        now += rng.randint(0, 6_000)
