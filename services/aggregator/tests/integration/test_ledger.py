"""The job's own window state on real Spark and a real checkpoint folder: a batch run again
after a crash reads what it read the first time; what the crashed attempt wrote is gone;
entries expire once the watermark has left them behind."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fluxgate_aggregator.ledger import ROW_SCHEMA, Ledger

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def row(second: int, value: float) -> tuple[Any, ...]:
    return ("d1", datetime.fromtimestamp(second, UTC), value, None, "Cel", True)


def held(ledger: Ledger) -> list[tuple[Any, ...]]:
    return sorted((r["event_time"].timestamp(), r["value"]) for r in ledger.rows(-1, this_batch=True).collect())


def run_batch(ledger: Ledger, spark: Any, batch_id: int, rows: list[tuple[Any, ...]], watermark_after: int) -> None:
    ledger.prepare(batch_id)
    ledger.record(
        spark.createDataFrame(rows, ROW_SCHEMA).persist(), max(r[1].timestamp() for r in rows) * 1000, len(rows)
    )
    ledger.commit(watermark_after, horizon_ms=1_000)


def test_a_batch_run_again_reads_what_it_read_and_old_entries_expire(spark: Any, tmp_path: Path) -> None:
    location = str(tmp_path / "ledger")
    first = Ledger(spark, location)
    run_batch(first, spark, 0, [row(1, 20.0)], watermark_after=500)
    first.prepare(1)
    first.record(spark.createDataFrame([row(2, 21.0)], ROW_SCHEMA).persist(), 2_000, 1)  # then the crash

    again = Ledger(spark, location)
    again.prepare(1)
    assert again.watermark_ms == 500 and held(again) == [(1.0, 20.0)], "batch 1's first attempt is not history"
    again.record(spark.createDataFrame([row(2, 21.5)], ROW_SCHEMA).persist(), 2_000, 1)
    again.commit(1_500, horizon_ms=1_000)
    run_batch(again, spark, 2, [row(3, 22.0)], watermark_after=2_500)
    assert held(again) == [(1.0, 20.0), (2.0, 21.5), (3.0, 22.0)], "entry 0 (1 s) is 0.5 s behind 1.5 s: kept"
    run_batch(again, spark, 3, [row(4, 23.0)], watermark_after=3_500)  # 1.5 s behind 2.5 s: expires

    after = Ledger(spark, location)
    after.prepare(4)
    assert after.watermark_ms == 3_500
    assert held(after) == [(2.0, 21.5), (3.0, 22.0), (4.0, 23.0)]
    assert sorted(p.name for p in (tmp_path / "ledger" / "rows").iterdir()) == ["1", "2", "3"]
