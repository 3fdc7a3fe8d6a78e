"""The job's own event-time state, kept next to Spark's checkpoint: the watermark each
micro-batch used, and the readings it accepted that a later batch may still need.

Spark's stateful operators keep their state where ``foreachBatch`` cannot reach it, so the
single query keeps its own, versioned by batch id like Spark's offset log:

* ``rows/<batch id>/``: the readings batch ``<batch id>`` accepted (Parquet): the ones it
  counted and the late ones it wrote, so that a copy arriving later is recognised. A counted
  reading is kept by its event time; a late one by when it arrived (the watermark of its
  batch), as it was already behind the watermark then: a copy a broker redelivers a minute
  later must still be known;
* ``meta/<batch id>.json``: the watermark after that batch and which ``rows/`` it still needs.

Batch N reads only what batches before N wrote, so a batch replayed after a crash sees
exactly the state it saw the first time and decides the same way. The files are for
restarts: while the job runs, each entry is also cached in Spark's memory, where batches
read it.
Through Hadoop's FileSystem, so HDFS and object-store checkpoints work too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from fluxgate_aggregator import checkpoints

log = structlog.get_logger(__name__)

ROW_SCHEMA = "device_id string, event_time timestamp, value double, sequence long, unit string, counted boolean"
ROW_COLUMNS = ("device_id", "event_time", "value", "sequence", "unit", "counted")
KEPT_METAS = 10


@dataclass
class Ledger:
    """What batch ``batch_id`` starts from: its watermark and the live ``rows/`` entries
    (batch id -> [the latest event time in them, how many, the watermark that batch started
    from (epoch ms)])."""

    spark: SparkSession
    location: str
    batch_id: int = -1
    committed: int = -1
    watermark_ms: int = 0
    entries: dict[int, list[int]] = field(default_factory=dict)
    # batch id -> (the cached DataFrame, its ROW_COLUMNS)
    cached: dict[int, tuple[DataFrame, DataFrame]] = field(default_factory=dict)

    def prepare(self, batch_id: int) -> None:
        """Make the ledger what batch ``batch_id`` starts from. In memory when the batch before
        it was committed in this run; else (a new run, a batch run again after it failed) read
        back from what the last batch before it committed."""
        if self.committed < 0 or batch_id != self.committed + 1:
            self._recover(batch_id)
        # A failed attempt at this batch may have recorded rows: they are not history.
        self.entries = {entry: latest for entry, latest in self.entries.items() if entry < batch_id}
        self._forget([entry for entry in self.cached if entry not in self.entries])
        self.batch_id = batch_id

    def reset(self) -> None:
        """Before the query starts (again): forget what is cached, read back at the next batch."""
        self._forget(list(self.cached))
        self.committed = -1

    def rows(self, after_ms: int, *, this_batch: bool = False) -> DataFrame:
        """Readings recorded before this batch (and by it, with ``this_batch``) kept after
        ``after_ms``: their event time is after it, or (the late ones) their batch's watermark."""
        wanted = [
            entry
            for entry, (latest, _, watermark) in sorted(self.entries.items())
            if max(latest, watermark) > after_ms and (entry < self.batch_id or this_batch)
        ]
        if not wanted:
            return self.spark.createDataFrame([], ROW_SCHEMA)
        newer = F.col("event_time") > F.timestamp_millis(F.lit(after_ms))
        # An entry whose batch started after ``after_ms`` is kept whole: its counted readings
        # are after that watermark, its late ones arrived after it.
        parts = [self._entry(e) if self.entries[e][2] > after_ms else self._entry(e).where(newer) for e in wanted]
        return reduce(DataFrame.unionByName, parts)

    def _entry(self, batch_id: int) -> DataFrame:
        if batch_id not in self.cached:
            back = self.spark.read.schema(ROW_SCHEMA).parquet(self._rows_path(batch_id)).persist()
            self.cached[batch_id] = (back, back)
        return self.cached[batch_id][1]

    @property
    def row_count(self) -> int:
        return sum(rows for _, rows, _ in self.entries.values())

    def record(self, cached: DataFrame, latest_event_ms: int | None, rows: int) -> bool:
        """Keep this batch's ``rows`` readings, the rows of ``cached`` (a persisted DataFrame
        with ROW_COLUMNS) with an event time; ``latest_event_ms`` None: there were none.
        True when the ledger took ``cached`` over (it unpersists it when the entry expires)."""
        if latest_event_ms is None or not rows:
            return False
        kept = cached.where(F.col("event_time").isNotNull()).select(*ROW_COLUMNS)
        kept.write.mode("overwrite").parquet(self._rows_path(self.batch_id))
        self.cached[self.batch_id] = (cached, kept)
        self.entries[self.batch_id] = [latest_event_ms, rows, self.watermark_ms]
        return True

    def commit(self, next_watermark_ms: int, horizon_ms: int) -> None:
        """Close this batch: the next one starts from ``next_watermark_ms``. Entries older than
        what *this* batch still needed are deleted, so a replay of it finds all it read."""
        oldest = self.watermark_ms - horizon_ms
        stale = [entry for entry, (latest, _, watermark) in self.entries.items() if max(latest, watermark) <= oldest]
        for entry in stale:
            del self.entries[entry]
        self._forget(stale)
        meta = {"watermark_ms": next_watermark_ms, "entries": {str(k): v for k, v in self.entries.items()}}
        self._write(f"{self.location}/meta/{self.batch_id}.json", json.dumps(meta))
        self.watermark_ms = next_watermark_ms
        self.committed = self.batch_id
        for entry in stale:
            self._delete(self._rows_path(entry))
        self._delete(f"{self.location}/meta/{self.batch_id - KEPT_METAS}.json")

    def _forget(self, entries: list[int]) -> None:
        for entry in entries:
            cached = self.cached.pop(entry, None)
            if cached is not None:
                cached[0].unpersist()

    def _recover(self, batch_id: int) -> None:
        self._forget(list(self.cached))
        metas = sorted(n for n in self._batch_ids("meta") if n < batch_id)
        meta = json.loads(self._read(f"{self.location}/meta/{metas[-1]}.json")) if metas else {}
        self.committed = metas[-1] if metas else -1
        self.watermark_ms = int(meta.get("watermark_ms", 0))
        # An entry written before entries kept their batch's watermark: kept by event time.
        self.entries = {int(k): [*map(int, v), 0][:3] for k, v in meta.get("entries", {}).items()}
        # What a run stopped in the middle of this batch (or later) wrote is not history.
        for entry in self._batch_ids("rows"):
            if entry >= batch_id:
                self._delete(self._rows_path(entry))
        log.info("ledger.recovered", batch=batch_id, watermark_ms=self.watermark_ms, entries=sorted(self.entries))

    def _rows_path(self, batch_id: int) -> str:
        return f"{self.location}/rows/{batch_id}"

    # --- Hadoop FileSystem through the gateway ---------------------------------------------

    def _path(self, path: str) -> tuple[Any, Any]:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None, "a classic (non-Connect) SparkSession"
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        return hadoop_path.getFileSystem(conf), hadoop_path

    def _batch_ids(self, folder: str) -> list[int]:
        fs, path = self._path(f"{self.location}/{folder}")
        if not fs.exists(path):
            return []
        names = [status.getPath().getName().removesuffix(".json") for status in fs.listStatus(path)]
        return [int(name) for name in names if name.isdigit()]

    def _write(self, path: str, text: str) -> None:
        """Whole or not at all: written aside, then renamed into place (as Spark's logs are)."""
        folder, name = path.rsplit("/", 1)
        fs, aside = self._path(f"{folder}/.{name}.tmp")
        stream = fs.create(aside, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        _, target = self._path(path)
        fs.delete(target, False)  # a batch run again replaces its entry
        if not fs.rename(aside, target):
            raise OSError(f"could not rename {aside} to {path}")

    def _read(self, path: str) -> str:
        text = checkpoints.read_text(self.spark, path)
        if text is None:
            raise FileNotFoundError(path)
        return text

    def _delete(self, path: str) -> None:
        fs, target = self._path(path)
        if fs.exists(target):
            fs.delete(target, True)
