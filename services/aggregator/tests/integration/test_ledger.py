"""The job's own window state on real Spark and a real checkpoint folder: a batch run again
after a crash reads what it read the first time; what the crashed attempt wrote is gone;
entries expire once their devices' watermarks have left them behind."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame

from fluxgate_aggregator import ledger as ledger_module
from fluxgate_aggregator.ledger import ROW_SCHEMA, Ledger

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def row(second: int, value: float, device: str = "d1") -> tuple[Any, ...]:
    return (device, datetime.fromtimestamp(second, UTC), value, None, "Cel", True, second * 1000, second * 1000)


def held(ledger: Ledger) -> list[tuple[Any, ...]]:
    return sorted((r["event_time"].timestamp(), r["value"]) for r in ledger.rows(this_batch=True).collect())


def record(ledger: Ledger, spark: Any, rows: list[tuple[Any, ...]]) -> DataFrame:
    """Record ``rows`` (their event time also their ingest time) and learn their device's
    clock; the device's watermark at the batch's start."""
    marks = ledger.marks()
    ledger.record(spark.createDataFrame(rows, ROW_SCHEMA).persist(), max(r[6] for r in rows), len(rows))
    readings = spark.createDataFrame(
        [(r[0], r[1], r[1]) for r in rows], "device_id string, event_time timestamp, ingest_time timestamp",
    )  # fmt: skip
    ledger.learn(readings.join(marks, "device_id", "left"), max(r[6] for r in rows))
    return marks


def run_batch(ledger: Ledger, spark: Any, batch_id: int, rows: list[tuple[Any, ...]]) -> None:
    ledger.prepare(batch_id)
    ledger.commit(record(ledger, spark, rows), horizon_ms=1_000)


def test_a_batch_run_again_reads_what_it_read_and_old_entries_expire(spark: Any, tmp_path: Path) -> None:
    location = str(tmp_path / "ledger")
    first = Ledger(spark, location, delay_ms=500)
    run_batch(first, spark, 0, [row(1, 20.0)])  # the gateways' clock at 1 s: d1's watermark 0.5 s
    first.prepare(1)
    record(first, spark, [row(2, 21.0)])  # then the crash

    again = Ledger(spark, location, delay_ms=500)
    again.prepare(1)
    assert again.watermark_ms == 500 and held(again) == [(1.0, 20.0)], "batch 1's first attempt is not history"
    assert [r["mark_ms"] for r in again.marks().collect()] == [500], "nor is the device table it learned"
    marks = record(again, spark, [row(2, 21.5)])
    again.commit(marks, horizon_ms=1_000)
    run_batch(again, spark, 2, [row(3, 22.0)])
    assert held(again) == [(1.0, 20.0), (2.0, 21.5), (3.0, 22.0)], "entry 0 (1 s) is 0.5 s behind 1.5 s: kept"
    run_batch(again, spark, 3, [row(4, 23.0)])  # 1.5 s behind d1's 2.5 s: expires

    after = Ledger(spark, location, delay_ms=500)
    after.prepare(4)
    assert after.watermark_ms == 3_500 and [r["mark_ms"] for r in after.marks().collect()] == [3_500]
    assert held(after) == [(2.0, 21.5), (3.0, 22.0), (4.0, 23.0)]
    # Entry 0, expired by batch 3 (whose replay would read it), went once batch 4 began.
    assert sorted(p.name for p in (tmp_path / "ledger" / "rows").iterdir()) == ["1", "2", "3"]
    # The table batch 3 started from (a replay of it would) and the one it left.
    assert sorted(p.name for p in (tmp_path / "ledger" / "devices").iterdir()) == ["2", "3"]


def test_a_batch_that_expired_an_entry_runs_again_when_spark_did_not_record_its_commit(
    spark: Any, tmp_path: Path
) -> None:
    """Spark writes its commit log after ``foreachBatch`` returns: a job killed between the
    ledger's commit and Spark's runs the batch again, from the entries the batch started from,
    those it expired included. Deleted with the batch's commit, one was missing for good, and
    every attempt failed on it."""
    location = str(tmp_path / "ledger")
    first = Ledger(spark, location, delay_ms=500)
    for n in range(4):  # batch 3 expires entry 0 (1.5 s behind d1's watermark of 2.5 s)
        run_batch(first, spark, n, [row(n + 1, 20.0 + n)])
    assert sorted(first.entries) == [1, 2, 3]

    again = Ledger(spark, location, delay_ms=500)
    again.prepare(3)
    assert held(again) == [(1.0, 20.0), (2.0, 21.0), (3.0, 22.0)], "what batch 3 read the first time"
    again.commit(record(again, spark, [row(4, 23.0)]), horizon_ms=1_000)
    # Batch 4 starts once Spark has recorded batch 3: entry 0 goes, entry 1 (expired by batch
    # 4, read by a replay of it) stays.
    run_batch(again, spark, 4, [row(5, 24.0)])
    assert sorted(again.entries) == [2, 3, 4]
    assert sorted(p.name for p in (tmp_path / "ledger" / "rows").iterdir()) == ["1", "2", "3", "4"]


def test_an_entry_is_a_file_per_rows_per_file_readings_whatever_its_partitions(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every later batch scans each file of each live entry as a task of its own: a batch of
    4 readings in 3 partitions (one per Kafka partition) is one file, not 3 of a row or two."""
    ledger = Ledger(spark, str(tmp_path / "ledger"), delay_ms=500)

    def files(batch_id: int, rows: list[tuple[Any, ...]]) -> int:
        ledger.prepare(batch_id)
        ledger.record(spark.createDataFrame(rows, ROW_SCHEMA).repartition(3), max(r[6] for r in rows), len(rows))
        return len(list((tmp_path / "ledger" / "rows" / str(batch_id)).glob("*.parquet")))

    assert files(0, [row(n, 20.0 + n) for n in range(1, 5)]) == 1
    monkeypatch.setattr(ledger_module, "ROWS_PER_FILE", 2)
    assert files(1, [row(n, 20.0 + n) for n in range(5, 9)]) == 2
    # Batch 0 never committed, so batch 1 starts without its entry: only batch 1's, whole.
    assert held(ledger) == [(float(n), 20.0 + n) for n in range(5, 9)]


def marks_of(ledger: Ledger) -> list[tuple[str, int]]:
    return sorted((r["device_id"], r["mark_ms"]) for r in ledger.marks().collect())


def test_devices_gone_cold_come_back_with_their_rows_through_a_restart_and_a_compaction(
    spark: Any, tmp_path: Path
) -> None:
    """Devices without readings in the ledger leave the device table for the cold files and
    the driver's cold store; recalled, their watermarks are what a ledger that kept every
    device says, after a restart that read the store back from merged files too."""
    cold = Ledger(spark, str(tmp_path / "cold"), delay_ms=500, evict_every=1, evict_at_least=1, compact_after=2)
    kept = Ledger(spark, str(tmp_path / "kept"), delay_ms=500, evict_every=1)  # evict_at_least: 200,000
    quiet = ["d1", "d3", "d4"]  # each sends once, in batches 0 to 2; d2 in every batch
    for n in range(9):
        rows = [row(n + 1, 20.0 + n, "d2")] + ([row(n + 1, 1.0, quiet[n])] if n < len(quiet) else [])
        for ledger in (cold, kept):
            run_batch(ledger, spark, n, rows)
    assert [device for device, _ in marks_of(cold)] == ["d2"], "the quiet devices went cold"
    assert kept.cold_files == [] and len(marks_of(kept)) == 4, "3 quiet devices are too few to evict"
    assert len(cold.cold_files) <= 2, f"merged past compact_after: {cold.cold_files}"
    on_disk = sorted(int(p.name) for p in (tmp_path / "cold" / "cold").iterdir())
    assert set(cold.cold_files) <= set(on_disk) and len(on_disk) <= 4, "superseded files go"

    again = Ledger(spark, str(tmp_path / "cold"), delay_ms=500, evict_every=1, evict_at_least=1, compact_after=2)
    again.prepare(9)
    kept.prepare(9)
    assert again.recall(["d9"]) is None, "a device never seen is new, not cold"
    back = again.recall(["d1", "d3", "d4", "d9"])
    assert back is not None
    assert sorted(tuple(r) for r in back.collect()) == [m for m in marks_of(kept) if m[0] in quiet], (
        "the recalled rows' watermarks are those a ledger that kept them gives"
    )
    assert marks_of(again) == marks_of(kept)


def test_an_eviction_check_counts_the_quiet_devices_only_when_the_drivers_counts_cannot_tell(
    spark: Any, tmp_path: Path
) -> None:
    """Every batch checks (``evict_every=1``) whether 4 devices are quiet. The table's rows,
    the rows it recalled, the batch's readings and the ledger's bound how many can be: the
    whole table is joined and counted only between those bounds, not at all under them, and
    over them the quiet devices go cold uncounted."""
    ledger = Ledger(spark, str(tmp_path / "ledger"), delay_ms=500, evict_every=1, evict_at_least=4)
    checks: list[tuple[int, bool]] = []
    evict = ledger._evict

    def spy(table: DataFrame, *, counted: bool = True) -> None:
        checks.append((ledger.batch_id, counted))
        evict(table, counted=counted)

    ledger._evict = spy  # type: ignore[method-assign]
    many = [row(1, 1.0, f"d{n}") for n in range(1, 13)]  # 12 devices send once, then d0 alone
    for n in range(8):
        run_batch(ledger, spark, n, [row(n + 1, 20.0, "d0"), *(many if n == 0 else [])])
    *counted, (gone_at, last_counted) = checks
    assert counted and all(was for _, was in counted), f"counted while the ledger held them: {checks}"
    assert not last_counted and ledger.cold_files == [gone_at], f"{checks}, cold files {ledger.cold_files}"
    assert ledger.cold_devices == 12 and gone_at < 7, "then the table holds d0 alone: no check joins it"


def test_a_new_ledgers_history_and_device_table_are_read_without_python_workers(spark: Any, tmp_path: Path) -> None:
    """Spark reads a frame made from a Python list, even an empty one, in Python workers (a task
    a core, the first starting PySpark's worker daemon): every new job's first batches did, for
    no rows. An RDD of no partitions gives Spark no task to run."""
    ledger = Ledger(spark, str(tmp_path / "ledger"), delay_ms=500)
    ledger.prepare(0)
    assert ledger.rows().rdd.getNumPartitions() == 0
    assert ledger.rows(this_batch=True, entry=True).rdd.getNumPartitions() == 0
    assert ledger.devices().rdd.getNumPartitions() == 0
    assert ledger.rows().collect() == [] and ledger.devices().collect() == []
