"""Issue #40's first candidate, measured: the aggregator's per-device routing as PySpark 4.1's
``transformWithState`` (Row API) over Spark's own RocksDB state, beside the job on the same input.

The input is ``bench/aggregator.py``'s (``_readings.Readings``: ``--readings`` from ``--devices``
over ``--span-minutes``, produced once to a fresh topic), read and decoded as the job's
baseline does (``job.read_decoded``: Kafka source, wire format in Catalyst), the ``temperature``
readings grouped by ``device_id`` into one ``transformWithState`` (``timeMode="None"``: no
timers, and no late-row filter, which Spark applies in ``EventTime`` mode only). Legs:

* ``tws``: :class:`WindowProcessor`: per device its watermark, its open windows' running
  statistics and the identities of its recent readings in Spark's state (RocksDB, changelog
  checkpointing); each micro-batch's readings routed against the device's watermark at the
  batch's start (late, copy, or counted), then the windows the new watermark passed emitted;
* ``empty``: :class:`EmptyProcessor`: the same query whose processor only reads its rows and
  returns none, no state: what Spark, Arrow and PySpark's Row conversion cost on their own.

The watermark is the simple rule, not the service's (``device_clocks.py``: the gateways'
``ingest_time`` clock as well): a device's newest event time minus ``--watermark-seconds``,
never moving back. Windows (device, start, count, min, max, mean, stddev, first and last event
time, unit) and late rows go to Spark's ``memory`` sink (a few thousand rows), and every run
checks the windows against a pure-Python reference of ``Readings`` (``aggregator_reference``).

CPU is sampled from /proc for the Spark JVM, this driver and every process the JVM forked
(the Python workers, where the processor runs: ``bench/aggregator.py``'s sampler sees the JVM
and the driver only, enough for the job, which runs no Python worker); peak memory is the
sum of their VmHWM. ``--logic-only`` times :func:`route_device` alone, in this process, on the
same readings: the processor's own Python share. Results: ``bench-results/tws_probe.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import struct
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _common import TICKS_PER_SECOND, CpuSampler, LegResult, micros_per, print_table, stack_up, write_report
from _readings import UNIT, Readings, produce_in_child
from aggregator import PARTITIONS, Leg
from aggregator_reference import window_starts
from confluent_kafka.schema_registry import SchemaRegistryClient
from fluxgate_testing import descendants, unique_topic
from kstreams.peer import Figures, Window, compare_windows, peak_rss_mib, reset_peak_rss
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark idiom
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from fluxgate_aggregator.contracts import Contracts, load_contracts
from fluxgate_aggregator.job import read_decoded
from fluxgate_aggregator.settings import AggregatorSettings, SparkSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_stack import Endpoints

# The workers run this file's processor; they must find the venv's pyspark, pyarrow and
# protobuf, which a bare "python3" on the PATH may not have.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

WINDOW_SCHEMA = "count long, min double, max double, mean double, m2 double, first_ms long, last_ms long, unit string"
CLOCK_SCHEMA = "newest_ms long, mark_ms long"
OUTPUT_SCHEMA = (
    "kind string, device_id string, window_start_ms long, count long, min double, max double, mean double,"
    " stddev double, first_ms long, last_ms long, unit string, event_ms long, record binary"
)
# One remembered identity, packed: event time, value, whether it has a sequence, the sequence,
# and until when it is kept (its event time if counted, its device's watermark then if late).
IDENTITY_FORMAT = "<qd?qq"  # a format, not a Struct: the processor is pickled, a Struct is not
BUCKET_MS = 60_000  # identities are stored in blobs per minute of keep time: few state calls per device

Identity = tuple[int, float, int | None]  # event_ms, value, sequence: IDENTITY_IN_METRIC


# --- the processor's logic: plain Python, no Spark ---------------------------------------------


@dataclass
class WindowStats:
    """Running statistics of one window: Welford's mean and M2, so no reading is kept."""

    count: int
    min: float
    max: float
    mean: float
    m2: float
    first_ms: int
    last_ms: int
    unit: str | None

    @classmethod
    def of(cls, event_ms: int, value: float, unit: str | None) -> WindowStats:
        return cls(1, value, value, value, 0.0, event_ms, event_ms, unit)

    def fold(self, event_ms: int, value: float, unit: str | None) -> None:
        self.count += 1
        delta = value - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (value - self.mean)
        self.min, self.max = min(self.min, value), max(self.max, value)
        self.first_ms, self.last_ms = min(self.first_ms, event_ms), max(self.last_ms, event_ms)
        # The job's max(unit): nulls skipped, deterministic whatever the order.
        if unit is not None and (self.unit is None or unit > self.unit):
            self.unit = unit

    @property
    def stddev(self) -> float:
        """Population standard deviation, as the job's ``stddev_pop``."""
        return math.sqrt(max(self.m2, 0.0) / self.count)

    def as_tuple(self) -> tuple[Any, ...]:
        return (self.count, self.min, self.max, self.mean, self.m2, self.first_ms, self.last_ms, self.unit)


@dataclass(frozen=True)
class Reading:
    """What the processor reads of one input row (the wire-format bytes carried for a late one)."""

    event_ms: int
    value: float
    sequence: int | None
    unit: str | None
    record: bytes = b""

    @property
    def identity(self) -> Identity:
        return (self.event_ms, self.value, self.sequence)


@dataclass
class DeviceState:
    """One device between batches: its newest event time and watermark (None before its
    first batch) and its open windows by start."""

    newest_ms: int | None = None
    mark_ms: int | None = None
    windows: dict[int, WindowStats] = field(default_factory=dict)


class Memory:
    """The identities a device remembers, with their keep time: counted ones in blobs per
    minute of event time (their keep time), each loaded on first use, so a batch reads only
    the minutes its readings fall in; late ones (few, kept by the watermark they came
    behind) all at once. Spark's state holds the blobs; tests hand in a dict."""

    def __init__(self, load: Callable[[int], bytes | None], late: bytes = b"", oldest_ms: int | None = None) -> None:
        self._load = load
        self.stored: dict[int, bytes] = {}  # the blobs loaded, as stored
        self.buckets: dict[int, dict[Identity, int]] = {}
        self.added: dict[int, list[tuple[Identity, int]]] = defaultdict(list)
        self.late = dict(unpack(late))
        self.oldest_ms = oldest_ms  # the oldest bucket that may be stored

    def recall(self, identity: Identity) -> int | None:
        """The keep time of a remembered identity, or None."""
        keep = self.late.get(identity)
        return keep if keep is not None else self._bucket(bucket_of(identity[0])).get(identity)

    def remember(self, identity: Identity, keep_ms: int, counted: bool) -> None:
        if not counted:
            self.late[identity] = keep_ms
            return
        bucket = bucket_of(keep_ms)
        self._bucket(bucket)[identity] = keep_ms
        self.added[bucket].append((identity, keep_ms))
        self.oldest_ms = bucket if self.oldest_ms is None else min(self.oldest_ms, bucket)

    def _bucket(self, bucket: int) -> dict[Identity, int]:
        found = self.buckets.get(bucket)
        if found is None:
            self.stored[bucket] = self._load(bucket) or b""
            found = self.buckets[bucket] = dict(unpack(self.stored[bucket]))
        return found

    def forget(self, mark_ms: int, horizon_ms: int) -> tuple[dict[int, bytes], list[int]]:
        """After the batch: the blobs to write (a bucket added to: what it held plus what was
        added) and the buckets to remove (every identity in them past the horizon), oldest
        first; the late identities past the horizon are dropped."""
        self.late = {i: keep for i, keep in self.late.items() if is_remembered(keep, mark_ms, horizon_ms)}
        gone: list[int] = []
        while self.oldest_ms is not None and not is_remembered(self.oldest_ms + BUCKET_MS - 1, mark_ms, horizon_ms):
            gone.append(self.oldest_ms)
            self.oldest_ms += BUCKET_MS
        writes = {b: self.stored[b] + pack(items) for b, items in self.added.items() if b not in gone}
        return writes, gone


@dataclass
class Routed:
    """What one batch of a device did: its late readings, the windows the batch closed, the
    copies it dropped, and the open windows it folded into (written back, the others not)."""

    late: list[Reading] = field(default_factory=list)
    closed: list[tuple[int, WindowStats]] = field(default_factory=list)
    copies: int = 0
    touched: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Rules:
    """The window and lateness figures (the service's defaults: 1 minute, 30 s, 2 minutes)."""

    size_ms: int = 60_000
    delay_ms: int = 30_000
    dedup_horizon_ms: int = 120_000

    @property
    def horizon_ms(self) -> int:
        """How far behind the watermark an identity is remembered: ``micro_batch.horizon_ms``."""
        return max(self.size_ms, self.delay_ms, self.dedup_horizon_ms)


def window_start(event_ms: int, size_ms: int) -> int:
    return event_ms - event_ms % size_ms


def is_late(event_ms: int, mark_ms: int | None) -> bool:
    """At or behind the device's watermark (a device without one yet has nothing late)."""
    return mark_ms is not None and event_ms <= mark_ms


def is_remembered(keep_ms: int, mark_ms: int | None, horizon_ms: int) -> bool:
    """``ledger.remembered``'s rule by device: kept while within the horizon behind the watermark."""
    return mark_ms is None or keep_ms > mark_ms - horizon_ms


def route_device(state: DeviceState, memory: Memory, readings: Iterable[Reading], rules: Rules) -> Routed:
    """One device's readings of one micro-batch against its watermark at the batch's start:
    a copy of a remembered identity (or of one earlier in the batch) is dropped, one at or
    behind the watermark is late (and remembered), the rest are folded into their windows.
    Then the watermark moves to the newest event time minus the delay (never back) and the
    windows whose end it passed are closed. Whatever the order of the batch's readings, the
    outcome is the same but for which of two copies is kept: a replayed batch decides alike."""
    mark = state.mark_ms
    out = Routed()
    newest = state.newest_ms
    for reading in readings:
        identity = reading.identity
        keep = memory.recall(identity)
        if keep is not None and is_remembered(keep, mark, rules.horizon_ms):
            out.copies += 1
        elif mark is not None and reading.event_ms <= mark:
            out.late.append(reading)
            memory.remember(identity, mark, counted=False)
        else:
            _fold(state, out, reading, rules.size_ms)
            memory.remember(identity, reading.event_ms, counted=True)
            newest = reading.event_ms if newest is None else max(newest, reading.event_ms)
    advance(state, out, newest, rules)
    return out


def _fold(state: DeviceState, out: Routed, reading: Reading, size_ms: int) -> None:
    start = window_start(reading.event_ms, size_ms)
    stats = state.windows.get(start)
    if stats is None:
        state.windows[start] = WindowStats.of(reading.event_ms, reading.value, reading.unit)
    else:
        stats.fold(reading.event_ms, reading.value, reading.unit)
    out.touched.add(start)


def advance(state: DeviceState, out: Routed, newest: int | None, rules: Rules) -> None:
    """The watermark after the batch and the windows it closed (popped from the open ones)."""
    state.newest_ms = newest
    if newest is None:
        return
    own = newest - rules.delay_ms
    state.mark_ms = own if state.mark_ms is None else max(state.mark_ms, own)
    for start in sorted(s for s in state.windows if s + rules.size_ms <= state.mark_ms):
        out.closed.append((start, state.windows.pop(start)))


# --- identities as state: packed blobs ---------------------------------------------------------


def bucket_of(keep_ms: int) -> int:
    return keep_ms - keep_ms % BUCKET_MS


def pack(identities: Iterable[tuple[Identity, int]]) -> bytes:
    """Identities with their keep time as one blob (a null sequence kept apart from 0)."""
    return b"".join(
        struct.pack(IDENTITY_FORMAT, event_ms, value, sequence is not None, sequence or 0, keep)
        for (event_ms, value, sequence), keep in identities
    )


def unpack(blob: bytes) -> Iterator[tuple[Identity, int]]:
    for event_ms, value, has_sequence, sequence, keep in struct.iter_unpack(IDENTITY_FORMAT, blob):
        yield (event_ms, value, sequence if has_sequence else None), keep


def window_row(device: str, start: int, stats: WindowStats) -> tuple[Any, ...]:
    """A closed window in ``OUTPUT_SCHEMA``'s order."""
    return ("window", device, start, stats.count, stats.min, stats.max, stats.mean, stats.stddev,
            stats.first_ms, stats.last_ms, stats.unit, None, None)  # fmt: skip


def late_row(device: str, reading: Reading) -> tuple[Any, ...]:
    """A late reading in ``OUTPUT_SCHEMA``'s order, with its wire-format bytes (the late topic's)."""
    return ("late", device, None, None, None, None, None, None, None, None, reading.unit, reading.event_ms,
            reading.record)  # fmt: skip


# --- the processors ----------------------------------------------------------------------------

DEVICE_SCHEMA = "newest_ms long, mark_ms long, oldest_bucket_ms long, late binary"
OUTPUT_FIELDS = tuple(part.split()[0] for part in OUTPUT_SCHEMA.split(","))


class WindowProcessor(StatefulProcessor):
    """The routing of one device per call, over three state variables: ``device`` (newest event
    time, watermark, oldest identity bucket, the late identities), ``windows`` (open window
    start -> running statistics) and ``counted`` (minute -> counted identities, packed)."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.device = handle.getValueState("device", DEVICE_SCHEMA)
        self.windows = handle.getMapState("windows", "start_ms long", WINDOW_SCHEMA)
        self.counted = handle.getMapState("counted", "bucket_ms long", "ids binary")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:  # noqa: N802, N803 - PySpark names it
        device_id = key[0]
        stored = self.device.get()
        state, memory, open_before = self._load(stored)
        # Input columns: device_id, event_ms, value, sequence, unit, record.
        readings = (Reading(row[1], row[2], row[3], row[4], row[5]) for row in rows)
        routed = route_device(state, memory, readings, self.rules)
        self._save(state, memory, routed, open_before)
        output = Row(*OUTPUT_FIELDS)
        for start, stats in routed.closed:
            yield output(*window_row(device_id, start, stats))
        for reading in routed.late:
            yield output(*late_row(device_id, reading))

    def _load(self, stored: tuple[Any, ...] | None) -> tuple[DeviceState, Memory, set[int]]:
        if stored is None:
            return DeviceState(), Memory(self._bucket), set()
        newest, mark, oldest, late = stored
        windows = {start[0]: WindowStats(*values) for start, values in self.windows.iterator()}
        return DeviceState(newest, mark, windows), Memory(self._bucket, bytes(late or b""), oldest), set(windows)

    def _bucket(self, bucket: int) -> bytes | None:
        found = self.counted.getValue((bucket,))
        return bytes(found[0]) if found else None

    def _save(self, state: DeviceState, memory: Memory, routed: Routed, open_before: set[int]) -> None:
        for start in routed.touched & state.windows.keys():
            self.windows.updateValue((start,), state.windows[start].as_tuple())
        for start, _ in routed.closed:
            if start in open_before:
                self.windows.removeKey((start,))
        writes, gone = memory.forget(state.mark_ms, self.rules.horizon_ms) if state.mark_ms is not None else ({}, [])
        for bucket in gone:
            self.counted.removeKey((bucket,))
        for bucket, blob in writes.items():
            self.counted.updateValue((bucket,), (blob,))
        self.device.update((state.newest_ms, state.mark_ms, memory.oldest_ms, pack(memory.late.items())))

    def close(self) -> None:
        pass


DEVICE_VALUE_SCHEMA = (
    "newest_ms long, mark_ms long, oldest_bucket_ms long, late binary, windows array<struct<start_ms: long,"
    " count: long, min: double, max: double, mean: double, m2: double, first_ms: long, last_ms: long,"
    " unit: string>>, counted array<struct<bucket_ms: long, ids: binary>>"
)


class OneValueProcessor(WindowProcessor):
    """:class:`WindowProcessor` with the whole device in one value state: two state calls per
    device and batch (a get and an update) instead of one per bucket and window, at the price
    of writing every remembered identity of the device again on each of its batches."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.device = handle.getValueState("device", DEVICE_VALUE_SCHEMA)

    def _load(self, stored: tuple[Any, ...] | None) -> tuple[DeviceState, Memory, set[int]]:
        if stored is None:
            self._blobs: dict[int, bytes] = {}
            return DeviceState(), Memory(self._blobs.get), set()
        newest, mark, oldest, late, windows, counted = stored
        self._blobs = {bucket: bytes(ids) for bucket, ids in counted}
        open_windows = {w[0]: WindowStats(*w[1:]) for w in windows}
        memory = Memory(self._blobs.get, bytes(late or b""), oldest)
        return DeviceState(newest, mark, open_windows), memory, set(open_windows)

    def _save(self, state: DeviceState, memory: Memory, routed: Routed, open_before: set[int]) -> None:
        writes, gone = memory.forget(state.mark_ms, self.rules.horizon_ms) if state.mark_ms is not None else ({}, [])
        blobs = {b: blob for b, blob in self._blobs.items() if b not in gone} | writes
        windows = [(start, *stats.as_tuple()) for start, stats in sorted(state.windows.items())]
        late = pack(memory.late.items())
        self.device.update((state.newest_ms, state.mark_ms, memory.oldest_ms, late, windows, sorted(blobs.items())))


class EmptyProcessor(StatefulProcessor):
    """Reads every row of its device and returns none, with no state: Spark's share alone."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:  # noqa: N802, N803 - PySpark names it
        for _ in rows:
            pass
        return iter(())

    def close(self) -> None:
        pass


# --- the query and its measurement -------------------------------------------------------------

RUNS = {
    "tws": "transformWithState: watermark, windows and identities in RocksDB",
    "onevalue": "the same, each device's state as one value (two state calls per device and batch)",
    "empty": "rows read, no state",
}
PROCESSORS: dict[str, Callable[[Rules], StatefulProcessor]] = {
    "tws": WindowProcessor,
    "onevalue": OneValueProcessor,
    "empty": lambda rules: EmptyProcessor(),
}
STATE_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


def probe_readings(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts) -> DataFrame:
    """The input topic decoded as the baseline does, the configured metric only, as the
    processor reads it (the wire-format bytes kept for the late readings' topic)."""
    reading = F.col("reading")
    decoded = read_decoded(spark, settings, contracts)
    return decoded.where(reading.isNotNull() & (reading["metric"] == settings.metric)).select(
        reading["device_id"].alias("device_id"),
        F.unix_millis(reading["event_time"]).alias("event_ms"),
        reading["value"].alias("value"),
        reading["sequence"].alias("sequence"),
        reading["unit"].alias("unit"),
        F.col("value").alias("record"),
    )


def start_probe(
    spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, run: str, rules: Rules
) -> StreamingQuery:
    processor = PROCESSORS[run](rules)
    grouped = probe_readings(spark, settings, contracts).groupBy("device_id")
    # "None": no timers and no watermark filter (Spark drops rows behind the watermark before
    # the processor in EventTime mode only); outputs go to memory: a few thousand rows.
    out = grouped.transformWithState(processor, OUTPUT_SCHEMA, "Append", "None")
    return (
        out.writeStream.queryName(f"probe_{run}")
        .format("memory")
        .outputMode("append")
        .option("checkpointLocation", str(Path(settings.checkpoint_dir) / run))
        .trigger(processingTime="0 seconds")
        .start()
    )


def tree_cpu_seconds(roots: Iterable[int]) -> float:
    """User + system CPU of ``roots`` and their live descendants, each with its reaped children
    (a Python worker that exited is in its parent's cutime)."""
    total = 0.0
    for pid in descendants(roots):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS_PER_SECOND
    return total


class TreeSampler(CpuSampler):
    """:class:`CpuSampler` over process trees: the Python workers do the processor's work."""

    def __init__(self, pids: Sequence[int], interval: float = 0.25) -> None:
        super().__init__(pids, interval)

    def _run(self) -> None:
        while True:
            self._samples.append((time.time(), tree_cpu_seconds(self._pids)))
            if self._stop.wait(self._interval):
                self._samples.append((time.time(), tree_cpu_seconds(self._pids)))
                return


@dataclass
class Measured:
    """One run of a probe query: its batches (``aggregator.Leg``), CPU with and without the
    JVM's children, peak memory of the tree, and what it output."""

    leg: Leg
    cpu_tree: float
    cpu_own: float
    peak_mib: float
    windows: dict[Window, Figures]
    late: int

    def row(self) -> dict[str, Any]:
        steady = self.leg.steady_rows
        return {
            "run": self.leg.name,
            "rows": self.leg.rows,
            "batches": len(self.leg.batches),
            "rows_per_second": round(self.leg.per_second),
            "cpu_us_per_row": micros_per(self.cpu_tree, steady),
            "cpu_us_per_row_jvm_and_driver": micros_per(self.cpu_own, steady),
            "peak_mib": self.peak_mib,
            "first_batch_s": round(self.leg.batches[0].durationMs["triggerExecution"] / 1000, 2),
            "batch_seconds": [round(p.durationMs["triggerExecution"] / 1000, 2) for p in self.leg.batches],
            "windows": len(self.windows),
            "late": self.late,
        }


def measure(
    spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, run: str, rules: Rules, pids: list[int]
) -> Measured:
    """Start the probe query, let it process the whole topic, stop it; measured from /proc."""
    reset_peak_rss(descendants(pids))
    started = time.perf_counter()
    with TreeSampler(pids) as tree, CpuSampler(pids) as own:
        query = start_probe(spark, settings, contracts, run, rules)
        try:
            query.processAllAvailable()
            if (error := query.exception()) is not None:
                raise SystemExit(f"probe {run} failed: {error}")
            peak = peak_rss_mib(descendants(pids))
        finally:
            query.stop()
    leg = Leg(run, RUNS[run], list(query.recentProgress), time.perf_counter() - started)
    begin, end = leg.steady_span
    rows = spark.table(f"probe_{run}").collect()
    windows = {(r["device_id"], r["window_start_ms"]): _figures(r) for r in rows if r["kind"] == "window"}
    late = sum(1 for r in rows if r["kind"] == "late")
    return Measured(leg, tree.used(begin, end), own.used(begin, end), peak, windows, late)


def _figures(row: Row) -> Figures:
    return (int(row["count"]), row["min"], row["max"], row["mean"], row["stddev"])


def expected_windows(readings: Readings, rules: Rules) -> dict[Window, Figures]:
    """The windows each device's final watermark closed, from the readings' own formulas, by
    two-pass statistics (``aggregator_reference``'s), not by the processor's Welford sums."""
    members: dict[Window, list[float]] = defaultdict(list)
    newest: dict[str, int] = {}
    for i in range(readings.count):
        device, event_ms = readings.device(i), readings.event_ms(i)
        for start in window_starts(event_ms, rules.size_ms, rules.size_ms):
            members[(device, start)].append(readings.value(i))
        newest[device] = max(newest.get(device, event_ms), event_ms)
    return {
        (device, start): (len(values), min(values), max(values), statistics.fmean(values), statistics.pstdev(values))
        for (device, start), values in members.items()
        if start + rules.size_ms <= newest[device] - rules.delay_ms
    }


def logic_only(readings: Readings, batch: int, rules: Rules) -> dict[str, Any]:
    """:func:`route_device` and the state's packing, in this process, over the same readings in
    the same batches: the processor's own Python per reading, without Spark or its state calls."""
    states: dict[str, DeviceState] = defaultdict(DeviceState)
    blobs: dict[str, dict[int, bytes]] = defaultdict(dict)
    late: dict[str, bytes] = defaultdict(bytes)
    oldest: dict[str, int | None] = defaultdict(lambda: None)
    batches = []  # grouped beforehand: Spark's shuffle does that, not the processor
    for first in range(0, readings.count, batch):
        by_device: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        for i in range(first, min(first + batch, readings.count)):
            by_device[readings.device(i)].append((readings.event_ms(i), readings.value(i), None, UNIT, b""))
        batches.append(by_device)
    started = time.process_time()
    for by_device in batches:
        for device, mine in by_device.items():
            memory = Memory(blobs[device].get, late[device], oldest[device])
            routed = route_device(states[device], memory, (Reading(*r) for r in mine), rules)
            mark = states[device].mark_ms
            writes, gone = memory.forget(mark, rules.horizon_ms) if mark is not None else ({}, [])
            for bucket in gone:
                blobs[device].pop(bucket, None)
            blobs[device].update(writes)
            late[device], oldest[device] = pack(memory.late.items()), memory.oldest_ms
            for start, stats in routed.closed:
                window_row(device, start, stats)
    used = time.process_time() - started
    return {"readings": readings.count, "cpu_us_per_reading": micros_per(used, readings.count)}


# --- the run -----------------------------------------------------------------------------------


def main() -> int:
    args = parse_args()
    rules = Rules(delay_ms=args.watermark_seconds * 1000)
    readings = Readings(args.readings, args.devices, args.span_minutes * 60_000)
    logic = logic_only(replace(readings, count=min(readings.count, args.logic_readings)), args.batch, rules)
    print(f"logic alone: {logic}", flush=True)
    if args.logic_only:
        return 0
    endpoints = stack_up()
    with tempfile.TemporaryDirectory(prefix="fluxgate-bench-tws-") as tmp:
        measured, produced = run_probes(args, endpoints, readings, rules, Path(tmp))
    expected = expected_windows(readings, rules)
    check = {m.leg.name: compare_windows(expected, m.windows) for m in measured if m.leg.name != "empty"}
    report(args, measured, produced, logic, check)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readings", type=int, default=1_000_000, help="readings in the topic (default: 1000000)")
    parser.add_argument("--batch", type=int, default=100_000, help="rows per micro-batch")
    parser.add_argument("--devices", type=int, default=1000, help="distinct device ids")
    parser.add_argument("--span-minutes", type=int, default=5, help="event time the readings cover")
    parser.add_argument("--watermark-seconds", type=int, default=30, help="the watermark's delay")
    parser.add_argument("--shuffle-partitions", type=int, default=SparkSettings().shuffle_partitions)
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    parser.add_argument("--runs", nargs="+", choices=tuple(RUNS), default=list(RUNS), help="which, in order")
    parser.add_argument("--logic-readings", type=int, default=200_000, help="readings of the logic-alone timing")
    parser.add_argument("--logic-only", action="store_true", help="time the processor's logic alone, no Spark")
    parser.add_argument("--job-json", type=Path, help="bench/aggregator.py's JSON of a run beside this one: ratios")
    return parser.parse_args()


def run_probes(
    args: argparse.Namespace, endpoints: Endpoints, readings: Readings, rules: Rules, tmp: Path
) -> tuple[list[Measured], dict[str, Any]]:
    spark_settings = SparkSettings(
        master=args.master,
        shuffle_partitions=args.shuffle_partitions,
        max_offsets_per_trigger=args.batch,
        conf=STATE_CONF,
    )
    client = SchemaRegistryClient({"url": endpoints.registry_url})
    topic = unique_topic("bench.tws.in", endpoints.bootstrap, PARTITIONS)
    # The job's contracts register the aggregate's schema under the output topic: one of its own,
    # never written (the outputs go to memory).
    unused_output = unique_topic("bench.tws.out", endpoints.bootstrap, PARTITIONS)
    produced = produce_in_child(endpoints.bootstrap, endpoints.registry_url, topic, readings)
    spark = build_session(spark_settings)
    jvm = spark.sparkContext._jvm  # the JVM's pid is only reachable through the gateway
    assert jvm is not None
    pids = [int(jvm.java.lang.ProcessHandle.current().pid()), os.getpid()]
    measured = []
    try:
        for run in args.runs:
            settings = AggregatorSettings(
                kafka=KafkaSettings(bootstrap_servers=endpoints.bootstrap),
                registry=RegistrySettings(url=endpoints.registry_url),
                spark=spark_settings,
                input_topic=topic,
                output_topic=unused_output,
                starting_offsets="earliest",
                checkpoint_dir=str(tmp),
            )
            contracts = load_contracts(client, settings.input_topic, settings.output_topic, "BACKWARD")
            measured.append(measure(spark, settings, contracts, run, rules, pids))
            print(f"{run}: {measured[-1].row()}", flush=True)
    finally:
        spark.stop()
    return measured, produced


def peer_figures(path: Path | None) -> dict[str, dict[str, float]]:
    """CPU per reading, rate and peak memory of the ``job`` and ``kstreams`` legs (their first
    round) in ``bench/aggregator.py``'s JSON of a run taken beside this one."""
    if path is None:
        return {}
    figures = {}
    for leg in json.loads(path.read_text())["legs"]:
        kind = leg["leg"].split("-")[0]
        if kind in {"job", "kstreams"} and kind not in figures:
            figures[kind] = {"cpu_us": leg["cpu_us"], "per_second": leg["per_second"], "peak_mib": leg["peak_mib"]}
    return figures


def report(
    args: argparse.Namespace, measured: list[Measured], produced: dict[str, Any], logic: dict[str, Any],
    check: dict[str, Any],
) -> None:  # fmt: skip
    title = (
        f"transformWithState probe, Spark {args.master}, {args.shuffle_partitions} shuffle partitions, "
        f"{args.batch} rows/batch, {args.devices} devices"
    )
    rows = [m.row() for m in measured]
    header = ["run", "rows", "batches", "rows/s", "CPU µs/row", "JVM+driver µs/row", "peak MiB", "first batch s"]
    print_table(title, header, [[r["run"], r["rows"], r["batches"], r["rows_per_second"], r["cpu_us_per_row"],
                                 r["cpu_us_per_row_jvm_and_driver"], r["peak_mib"], r["first_batch_s"]]
                                for r in rows])  # fmt: skip
    print(f"  logic alone: {logic['cpu_us_per_reading']} µs/reading; windows against the reference: {check}")
    peers = peer_figures(args.job_json)
    ratios = ratios_of(rows, peers)
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.3f}")
    legs = [LegResult("", r["run"], r["rows_per_second"], r["cpu_us_per_row"],
                      {k: v for k, v in r.items() if k not in {"run", "rows_per_second", "cpu_us_per_row"}})
            for r in rows]  # fmt: skip
    settings = {
        "master": args.master,
        "shuffle_partitions": args.shuffle_partitions,
        "rows_per_batch": args.batch,
        "readings": args.readings,
        "devices": args.devices,
        "span_minutes": args.span_minutes,
        "watermark_seconds": args.watermark_seconds,
        "state": STATE_CONF,
        "input_produced_in": produced,
        "logic_alone": logic,
        "windows_checked": check,
        "peers": peers,
    }
    paths = write_report("tws_probe", title, "row", legs, ratios, settings)
    print(f"written to {paths[0]}")


def ratios_of(rows: list[dict[str, Any]], peers: dict[str, dict[str, float]]) -> dict[str, float]:
    """Each probe run over the job and the peer (above 1: it spends more, or is faster), and
    the empty processor's share of the full one's CPU."""
    by_run = {r["run"]: r for r in rows}
    ratios = {}
    tws, empty = by_run.get("tws"), by_run.get("empty")
    if tws and empty and tws["cpu_us_per_row"]:
        ratios["empty_over_tws_cpu_per_row"] = empty["cpu_us_per_row"] / tws["cpu_us_per_row"]
    figures = (("cpu_us", "cpu_us_per_row", "cpu_per_row"), ("peak_mib", "peak_mib", "peak_memory"),
               ("per_second", "rows_per_second", "rows_per_second"))  # fmt: skip
    for name, row in by_run.items():
        for peer, theirs in peers.items():
            for figure, ours, label in figures:
                if theirs.get(figure):
                    ratios[f"{name}_over_{peer}_{label}"] = row[ours] / theirs[figure]
    return ratios


if __name__ == "__main__":
    sys.exit(main())
