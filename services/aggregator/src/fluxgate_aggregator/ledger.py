"""The job's own event-time state, kept next to Spark's checkpoint: the gateways' clock and
each device's clock (:mod:`~fluxgate_aggregator.device_clocks`) each micro-batch used, and
the readings it accepted that a later batch may still need.

Spark's stateful operators keep their state where ``foreachBatch`` cannot reach it, so the
single query keeps its own, versioned by batch id like Spark's offset log:

* ``rows/<batch id>/``: the readings batch ``<batch id>`` accepted (Parquet): the ones it
  counted and the late ones it wrote, so that a copy arriving later is recognised. Each is
  kept while ``keep_ms`` is within the horizon of its own device's watermark: a counted
  reading's event time; a late one's arrival (its device's watermark then), as it was
  already behind the watermark: a copy a broker redelivers a minute later must still be
  known. A counted one is also kept while its arrival (``arrived_ms``, on the gateways'
  clock) is within the horizon of that clock: the batch that counted it may have moved its
  device's watermark far past it (a new device's first batch, a clock set forward). An
  entry goes once none of its readings is kept;
* ``devices/<batch id>/``: the device table (Parquet) as that batch left it: every device
  with readings in the ledger, and the others until the next eviction. Every
  ``evict_every`` batches, once ``evict_at_least`` devices have no readings in the ledger,
  those leave it for ``cold/<batch id>/``, whose rows the driver keeps
  (:mod:`~fluxgate_aggregator.cold_devices`) and hands back to a batch that meets one of
  them again (:meth:`Ledger.recall`). A batch's Spark work on devices is then bounded by the
  ledger, which the rate sets, not by the fleet (decision 0014);
* ``meta/<batch id>.json``: the gateways' clock and the watermark after that batch, which
  device table, which ``cold/`` files (later ones replace a device's row in earlier ones)
  and which ``rows/`` it still needs.

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
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from fluxgate_aggregator import checkpoints, device_clocks
from fluxgate_aggregator.batch_values import with_values
from fluxgate_aggregator.cold_devices import ColdDevices

log = structlog.get_logger(__name__)

ROW_SCHEMA = (
    "device_id string, event_time timestamp, value double, sequence long, unit string, counted boolean, keep_ms long,"
    " arrived_ms long"
)
ROW_COLUMNS = ("device_id", "event_time", "value", "sequence", "unit", "counted", "keep_ms", "arrived_ms")
KEPT_METAS = 10
# Readings a file of an entry holds at most. Every later batch reads each file of each live
# entry as a task of its own, twice or more; written as the batch's partitions came (one per
# Kafka partition), a small batch's entry cost those scans tasks of a few rows each
# (bench/results/2026-12-02-aggregator-fewer-executions.md).
ROWS_PER_FILE = 100_000
NEVER = -(2**62)  # a mark before any reading: what a device new in a batch has


ARRIVED_AFTER = "_arrived_after_ms"  # a batch value (batch_values), not a literal


def with_clock(rows: DataFrame, horizon_ms: int, clock_ms: int | None) -> DataFrame:
    """Ledger ``rows`` ready for :func:`remembered` in a batch that starts at the gateways'
    clock ``clock_ms`` (None: no reading has told it yet)."""
    return rows if clock_ms is None else with_values(rows, **{ARRIVED_AFTER: clock_ms - horizon_ms})


def remembered(rows: DataFrame, mark: Column, horizon_ms: int) -> Column:
    """Whether a ledger row (of ``rows``, from :func:`with_clock`) is still known to a reading
    of its device whose watermark is ``mark``."""
    by_device = rows["keep_ms"] > mark - F.lit(horizon_ms)
    if ARRIVED_AFTER not in rows.columns:
        return by_device
    # Null for rows written before rows had arrived_ms: kept by keep_ms alone, as then.
    by_arrival = rows["counted"] & (rows["arrived_ms"] > rows[ARRIVED_AFTER])
    return by_device | F.coalesce(by_arrival, F.lit(False))


@dataclass
class Ledger:
    """What batch ``batch_id`` starts from: the gateways' clock, the device table, the
    watermark it reports, and the live ``rows/`` entries (batch id -> [the latest event time
    in them, how many, the reported watermark that batch started from (epoch ms)])."""

    spark: SparkSession
    location: str
    delay_ms: int = 0
    batch_id: int = -1
    committed: int = -1
    clock_ms: int | None = None
    watermark_ms: int = 0
    # A checkpoint of the job before decision 0011 had one watermark for every device: the
    # devices it saw are judged against it until they send again.
    legacy_ms: int | None = None
    entries: dict[int, list[int]] = field(default_factory=dict)
    # batch id -> the entry's rows (ROW_COLUMNS), cached as read back from its file
    cached: dict[int, DataFrame] = field(default_factory=dict)
    devices_at: int | None = None  # the batch whose device table this batch starts from
    _devices: DataFrame | None = None
    _learned: tuple[int, DataFrame, int | None] | None = None  # this batch's table and clock
    # Every evict_every batches the devices without readings in the ledger go cold, once
    # there are evict_at_least of them; their rows are in cold_files (batch ids, oldest
    # first), merged into one past compact_after. Below that many, keeping the rows costs a
    # batch less than recalling the devices that come back: 0.4 to 0.5 s less at 100,000
    # quiet devices, even at 300,000 (bench/results/2026-12-02-aggregator-eviction-threshold.md).
    evict_every: int = 8
    evict_at_least: int = 200_000
    compact_after: int = 16
    cold_files: list[int] = field(default_factory=list)
    _cold: ColdDevices = field(default_factory=ColdDevices)
    _recalled: DataFrame | None = None  # this batch's devices back from the cold store
    _recalled_rows: int = 0  # how many
    _cold_after: list[int] | None = None  # cold_files once this batch commits, if it evicted
    # The entries the last committed batch expired: a replay of it reads them, the next batch
    # does not, so their files go when that batch commits.
    _expired: list[int] = field(default_factory=list)

    def prepare(self, batch_id: int) -> None:
        """Make the ledger what batch ``batch_id`` starts from. In memory when the batch before
        it was committed in this run; else (a new run, a batch run again after it failed) read
        back from what the last batch before it committed."""
        if self.committed < 0 or batch_id != self.committed + 1:
            self._recover(batch_id)
        # A failed attempt at this batch may have recorded rows: they are not history.
        self.entries = {entry: latest for entry, latest in self.entries.items() if entry < batch_id}
        self._forget([entry for entry in self.cached if entry not in self.entries])
        self._drop_learned()
        self._recalled, self._recalled_rows = None, 0
        self.batch_id = batch_id

    def reset(self) -> None:
        """Before the query starts (again): forget what is cached, read back at the next batch."""
        self._forget(list(self.cached))
        self._drop_learned()
        if self._devices is not None:
            self._devices.unpersist()
            self._devices = None
        self.committed = -1

    def marks(self) -> DataFrame:
        """``device_id``, ``mark_ms``: every known device's watermark at the batch's start."""
        return device_clocks.watermarks(self.devices(), self.clock_ms, self.delay_ms)

    def mark_of(self, mark: Column) -> Column:
        """A device's watermark at the batch's start, ``mark`` (from :meth:`marks`) null when
        the table has no row for it: none for a new device, but a checkpoint from before
        decision 0011 has the fleet-wide one for every device."""
        return mark if self.legacy_ms is None else F.coalesce(mark, F.lit(self.legacy_ms))

    def devices(self) -> DataFrame:
        """The device table this batch starts from, with the devices it recalled."""
        table = self._table()
        return table if self._recalled is None else table.unionByName(self._recalled)

    def recall(self, device_ids: list[str]) -> DataFrame | None:
        """Hand the batch the rows of those of ``device_ids`` (devices the table has no row
        for) that went cold: their ``device_id``, ``mark_ms`` (as :meth:`marks` gives them
        from here on), None when there were none and the batch's marks stay as they were."""
        rows = self._cold.get(device_ids) if self.cold_files else []
        if not rows:
            return None
        back = self.spark.createDataFrame(rows, device_clocks.DEVICES_SCHEMA)
        self._recalled = back if self._recalled is None else self._recalled.unionByName(back)
        self._recalled_rows += len(rows)
        log.debug("ledger.recalled", batch=self.batch_id, devices=len(rows))
        return device_clocks.watermarks(back, self.clock_ms, self.delay_ms)

    def close(self) -> None:
        """When the job stops: the cold store's file goes (a restart reads it back)."""
        self._cold.close()

    @property
    def cold_devices(self) -> int:
        """How many devices the cold store holds (some may be back in the table since)."""
        return len(self._cold)

    def _table(self) -> DataFrame:
        if self._devices is None:
            if self.devices_at is None:
                self._devices = self._empty(device_clocks.DEVICES_SCHEMA)
            else:
                path = self._devices_path(self.devices_at)
                self._devices = self.spark.read.schema(device_clocks.DEVICES_SCHEMA).parquet(path).persist()
        return self._devices

    def learn(self, readings: DataFrame, newest_ingest_ms: int | None) -> DataFrame:
        """The device table after this batch's ``readings`` (see
        :func:`~fluxgate_aggregator.device_clocks.learned`), written aside until the batch
        commits; returns every device's watermark after the batch."""
        clock = self.clock_ms if newest_ingest_ms is None else max(self.clock_ms or newest_ingest_ms, newest_ingest_ms)
        table = device_clocks.learned(self.devices(), readings, (self.clock_ms, clock), self.delay_ms)
        # After an eviction the table holds little more than the ledger's devices and grows by
        # about a batch's devices a batch: until it has grown past the threshold, no check
        # needs to join the whole table to count its quiet devices.
        checks = self.batch_id % self.evict_every == self.evict_every - 1
        fewest, most = self._quiet_bounds() if checks else (0, 0)
        if checks and most >= self.evict_at_least:
            self._evict(table, counted=fewest < self.evict_at_least)
        else:
            table.write.mode("overwrite").parquet(self._devices_path(self.batch_id))
        back = self.spark.read.schema(device_clocks.DEVICES_SCHEMA).parquet(self._devices_path(self.batch_id))
        self._learned = (self.batch_id, back.persist(), clock)
        return device_clocks.watermarks(back, clock, self.delay_ms)

    def _quiet_bounds(self) -> tuple[int, int]:
        """The fewest and the most devices without readings in the ledger that the table
        after this batch (recorded already) can hold, from counts the driver has: the table
        this batch started from (cached, so a count is cheap), the rows it recalled, the
        batch's readings (each could be a new device) and the ledger's readings (each could
        be a device of its own). Where both are on one side of ``evict_at_least``, the
        eviction need not count them with a join of the whole table."""
        table = self._table().count() + self._recalled_rows
        batch = self.entries[self.batch_id][1] if self.batch_id in self.entries else 0
        fewest, most = max(0, table - self.row_count), table + batch
        log.info("ledger.quiet_devices_bounded", batch=self.batch_id, fewest=fewest, most=most)
        return fewest, most

    def _evict(self, table: DataFrame, *, counted: bool = True) -> None:
        """Write ``table`` as this batch's device table without the devices that have no
        reading in the ledger (this batch's entry included), and those as its cold file,
        their rows stored in the cold store at once: they are the rows the table this batch
        started from holds for them, so a replay finds the same either way. ``counted``
        False: they are known to be at least ``evict_at_least`` without a count."""
        whole = table.persist()
        live = self.rows(this_batch=True).select("device_id").distinct()
        # Counted, stored and written: joined once.
        gone = whole.join(live, "device_id", "left_anti").persist()
        try:
            enough = not counted or gone.count() >= self.evict_at_least
            moved = self._cold.put(gone.toLocalIterator()) if enough else 0
            kept = whole
            if moved:
                files, cold = [*self.cold_files, self.batch_id], gone
                if len(files) > self.compact_after:  # every cold row in this batch's file
                    cold, files = self._newest(self.cold_files, gone), [self.batch_id]
                cold.write.mode("overwrite").parquet(self._cold_path(self.batch_id))
                kept = whole.join(live, "device_id", "left_semi")
                self._cold_after = files
                log.info("ledger.evicted", batch=self.batch_id, devices=moved, cold_files=len(files))
            kept.write.mode("overwrite").parquet(self._devices_path(self.batch_id))
        finally:
            gone.unpersist()
            whole.unpersist()

    def _newest(self, files: list[int], gone: DataFrame) -> DataFrame:
        """Each device's row in the newest of the cold ``files`` and ``gone`` that has one."""
        parts = [self._read_cold(at).withColumn("at", F.lit(at)) for at in files]
        rows = reduce(DataFrame.unionByName, parts, gone.withColumn("at", F.lit(self.batch_id)))
        newest = F.max_by(F.struct("newest_ms", "offset_ms", "floor_ms"), "at").alias("row")
        return rows.groupBy("device_id").agg(newest).select("device_id", "row.*")

    def _empty(self, schema: str) -> DataFrame:
        """No rows, from an RDD of no partitions: a frame made from a list, even an empty one,
        is read through Python workers (a task per core, and a worker daemon started for it)."""
        return self.spark.createDataFrame(self.spark.sparkContext.emptyRDD(), schema)

    def _read_cold(self, at: int) -> DataFrame:
        return self.spark.read.schema(device_clocks.DEVICES_SCHEMA).parquet(self._cold_path(at))

    def rows(self, *, this_batch: bool = False, entry: bool = False) -> DataFrame:
        """Readings recorded before this batch (and by it, with ``this_batch``), each with the
        batch that recorded it as ``entry`` if asked. Which of them a batch still knows is
        decided per device (``keep_ms`` against the device's watermark)."""
        wanted = [e for e in sorted(self.entries) if e < self.batch_id or this_batch]
        schema = ROW_SCHEMA + (", entry string" if entry else "")
        if not wanted:
            return self._empty(schema)
        # A string: a long literal would make each new entry's code anew (batch_values).
        parts = [self._entry(e).withColumn("entry", F.lit(str(e))) if entry else self._entry(e) for e in wanted]
        return reduce(DataFrame.unionByName, parts)

    def _entry(self, batch_id: int) -> DataFrame:
        if batch_id not in self.cached:
            back = self.spark.read.schema(ROW_SCHEMA).parquet(self._rows_path(batch_id))
            # Rows written before each row had its own keep_ms: as the job kept them then.
            arrived = F.lit(self.entries[batch_id][2])
            keep = F.coalesce(
                F.col("keep_ms"), F.when(F.col("counted"), F.unix_millis("event_time")).otherwise(arrived)
            )
            back = back.withColumn("keep_ms", keep).persist()
            self.cached[batch_id] = back
        return self.cached[batch_id]

    @property
    def row_count(self) -> int:
        return sum(rows for _, rows, _ in self.entries.values())

    def record(self, records: DataFrame, latest_event_ms: int | None, rows: int) -> None:
        """Keep this batch's ``rows`` readings, the rows of ``records`` (with ROW_COLUMNS) with
        an event time, in a file per ``ROWS_PER_FILE``; ``latest_event_ms`` None: there were none.

        The entry is cached as read back from its file, not as ``records``: a cached frame
        keeps its plan, and the batch's plan holds the broadcast of the device table it was
        routed against. Spark frees a broadcast only once nothing refers to it, so each entry
        kept one table's broadcast in the driver's memory for as long as it lived: a few
        hundred MB at 300,000 devices, the 1 GiB heap full and the job in full collections
        (bench/results/2026-12-01-aggregator-cold-devices.md)."""
        if latest_event_ms is None or not rows:
            return
        path = self._rows_path(self.batch_id)
        entry = records.where(F.col("event_time").isNotNull()).select(*ROW_COLUMNS)
        entry.coalesce(-(-rows // ROWS_PER_FILE)).write.mode("overwrite").parquet(path)
        back = self.spark.read.schema(ROW_SCHEMA).parquet(path).persist()
        self.cached[self.batch_id] = back
        self.entries[self.batch_id] = [latest_event_ms, rows, self.watermark_ms]

    def commit(self, marks: DataFrame, horizon_ms: int) -> None:
        """Close this batch: the next one starts from the device table :meth:`learn` made.
        Entries none of whose readings this batch still knew (by ``marks``, the watermarks it
        started from) leave the ledger; their files stay until the next batch commits, as
        Spark records this batch's commit only after it returns: a job stopped in between
        runs this batch again, from every entry it started from."""
        stale = self._stale(marks, horizon_ms)
        for entry in stale:
            del self.entries[entry]
        self._forget(stale)
        previous = self.devices_at  # the table a replay of this batch would start from
        cold_before = self.cold_files  # and the cold files
        if self._cold_after is not None:
            self.cold_files, self._cold_after = self._cold_after, None
        if self._learned is not None:
            _, table, clock = self._learned
            if self._devices is not None:
                self._devices.unpersist()
            self._devices, self.devices_at, self.clock_ms, self._learned = table, self.batch_id, clock, None
        if self.clock_ms is not None:
            self.watermark_ms = max(self.watermark_ms, self.clock_ms - self.delay_ms)
        meta = {
            "clock_ms": self.clock_ms,
            "watermark_ms": self.watermark_ms,
            "legacy_ms": self.legacy_ms,
            "devices": self.devices_at,
            "cold": self.cold_files,
            "entries": {str(k): v for k, v in self.entries.items()},
        }
        self._write(f"{self.location}/meta/{self.batch_id}.json", json.dumps(meta))
        self.committed = self.batch_id
        for entry in self._expired:
            self._delete(self._rows_path(entry))
        self._expired = stale
        # The table a replay of this batch would start from stays; older ones go.
        if previous is not None:
            for table_at in self._batch_ids("devices"):
                if table_at < previous:
                    self._delete(self._devices_path(table_at))
        for at in self._batch_ids("cold"):
            if at not in self.cold_files and at not in cold_before:
                self._delete(self._cold_path(at))
        self._delete(f"{self.location}/meta/{self.batch_id - KEPT_METAS}.json")

    def _stale(self, marks: DataFrame, horizon_ms: int) -> list[int]:
        older = [entry for entry in self.entries if entry < self.batch_id]
        if not older:
            return []
        mark = F.coalesce(self.mark_of(F.col("mark_ms")), F.lit(NEVER))
        rows = with_clock(self.rows(entry=True), horizon_ms, self.clock_ms).join(marks, "device_id", "left")
        live = rows.where(remembered(rows, mark, horizon_ms)).select("entry").distinct()
        kept = {int(row["entry"]) for row in live.collect()}
        return [entry for entry in older if entry not in kept]

    def _drop_learned(self) -> None:
        if self._learned is not None:
            self._learned[1].unpersist()
            self._learned = None
        self._cold_after = None

    def _forget(self, entries: list[int]) -> None:
        for entry in entries:
            cached = self.cached.pop(entry, None)
            if cached is not None:
                cached.unpersist()

    def _recover(self, batch_id: int) -> None:
        self._forget(list(self.cached))
        if self._devices is not None:
            self._devices.unpersist()
            self._devices = None
        metas = sorted(n for n in self._batch_ids("meta") if n < batch_id)
        meta = json.loads(self._read(f"{self.location}/meta/{metas[-1]}.json")) if metas else {}
        self.committed = metas[-1] if metas else -1
        self.watermark_ms = int(meta.get("watermark_ms", 0))
        if metas and "clock_ms" not in meta:
            self.legacy_ms = self.watermark_ms  # a checkpoint of the fleet-wide watermark
        else:
            self.legacy_ms = meta.get("legacy_ms")
        self.clock_ms = meta.get("clock_ms")
        self.devices_at = meta.get("devices")
        self.cold_files = [int(at) for at in meta.get("cold", [])]
        self._load_cold()
        # An entry written before entries kept their batch's watermark: kept by event time.
        self.entries = {int(k): [*map(int, v), 0][:3] for k, v in meta.get("entries", {}).items()}
        # What a run stopped in the middle of this batch (or later) wrote is not history; the
        # entries the batch before it expired are read by no batch from here on.
        for entry in self._batch_ids("devices"):
            if entry >= batch_id:
                self._delete(self._devices_path(entry))
        for at in self._batch_ids("cold"):
            if at >= batch_id:
                self._delete(self._cold_path(at))
        for entry in self._batch_ids("rows"):
            if entry >= batch_id or entry not in self.entries:
                self._delete(self._rows_path(entry))
        self._expired = []
        log.info(
            "ledger.recovered",
            batch=batch_id,
            clock_ms=self.clock_ms,
            devices=self.devices_at,
            cold_files=self.cold_files,
            entries=sorted(self.entries),
        )

    def _load_cold(self) -> None:
        """The cold store as the committed batch left it: its files oldest first, so that a
        device's row in a later one replaces the earlier."""
        self._cold.clear()
        for at in self.cold_files:
            self._cold.put(self._read_cold(at).toLocalIterator())

    def _rows_path(self, batch_id: int) -> str:
        return f"{self.location}/rows/{batch_id}"

    def _devices_path(self, batch_id: int) -> str:
        return f"{self.location}/devices/{batch_id}"

    def _cold_path(self, batch_id: int) -> str:
        return f"{self.location}/cold/{batch_id}"

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
