"""One micro-batch of the single query: every record read and decoded once, then routed
against its own device's watermark at the batch's start (decision 0011,
:mod:`~fluxgate_aggregator.device_clocks`): one device's clock changes nothing for another.

* not decodable -> the dead-letter topic (original key and bytes, reason in headers);
* of a device the ledger sent cold (no reading of it in the ledger for a while): judged
  again once the device's row is back (:meth:`~fluxgate_aggregator.ledger.Ledger.recall`,
  :func:`with_recalled`), so it is judged as if the row had never left;
* at or behind its device's watermark -> the late topic (original bytes), unless it is a copy
  of a reading of that device already counted or written late (the :class:`Ledger`
  remembers them);
* otherwise counted (every reading of a device new in the batch is): it joins the ledger,
  and every window of a device that the device's new watermark closes is aggregated from the
  ledger's counted readings, copies once, and written once.

A reading therefore ends either counted or late, never both, and the decision is the same
when the batch is run again after a crash (same offsets, same ledger). Copies of a counted
reading are dropped when its window closes, not on arrival: that costs a shuffle of the
closing windows' readings instead of a join of every batch with the whole ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from prometheus_client import Summary
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fluxgate_aggregator.consumed import IDENTITY_IN_METRIC
from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.deadletters import dead_letter_headers
from fluxgate_aggregator.ledger import Ledger, remembered, with_clock
from fluxgate_aggregator.settings import AggregatorSettings, duration_ms
from fluxgate_aggregator.window_stats import encoded, window_stats
from fluxgate_aggregator.wire import MAGIC_OK, SCHEMA_ID, with_reading
from fluxgate_aggregator.writers import WriterSchemas
from fluxgate_core.serde import value_subject

if TYPE_CHECKING:
    from fluxgate_aggregator.driver_state import JobState

FIELDS = ("device_id", "event_time", "value", "sequence", "unit", "ingest_time")
# Where a batch's time goes, for the profile of the whole pipeline (bench/pipeline.py): each
# phase is one or more Spark jobs the driver waits on.
PHASE_SECONDS = Summary(
    "fluxgate_aggregator_phase_seconds",
    "Driver wall time in each phase of the micro-batches: read (Kafka read, decode, cache, outcome),"
    " ledger (write the batch's entry), late (look up late readings' copies), write (aggregate the"
    " closing windows and write every output), commit (the ledger's meta and deletes)",
    ["phase"],
)
HEADERS = "array<struct<key:string,value:binary>>"


@dataclass(frozen=True)
class Outcome:
    """How a batch's records fall, as the driver sees it after the batch's first job."""

    dead: int
    counted: int
    behind: int  # at or behind their device's watermark, copies included
    latest_event_ms: int | None
    latest_ingest_ms: int | None  # the gateways' clock, as far as this batch tells
    unknown_ids: list[int]  # schema ids of wire-format records the batch had no writer schema for
    unmarked: list[str]  # devices of the batch the device table has no row for: new, or gone cold


def routed(
    batch: DataFrame, settings: AggregatorSettings, known_ids: list[int], ledger: Ledger, marks: DataFrame
) -> DataFrame:
    """What routing needs of each record, flat: the reading's fields, its device's watermark
    at the batch's start (``mark_ms``, from the ledger's ``marks``: null for a new device) and
    ``counted`` (after it) for the readings of the metric; the key and bytes of those that may
    be written as they came (the undecodable, with dead-letter headers, and the late). Cached
    for the batch's steps (its only copy), so it is kept slim."""
    dead = F.col("reading").isNull()
    ours = batch.where(dead | (F.col("reading.metric") == settings.metric))
    marked = marks.withColumnRenamed("device_id", "marked_device")
    joined = ours.join(marked, F.col("reading.device_id") == F.col("marked_device"), "left")
    mark = ledger.mark_of(F.col("mark_ms"))
    counted, keep = _judged(mark, F.col("reading.event_time"))
    # No row in the table (before the fleet-wide mark of an old checkpoint stands in): its
    # bytes are kept too, in case its row comes back from the cold store and it is late then.
    unmarked = ~dead & F.col("mark_ms").isNull()
    kept = dead | ~counted | unmarked
    unknown = dead & F.col(MAGIC_OK) & ~F.col(SCHEMA_ID).isin(known_ids)
    fields = [F.col(f"reading.{name}").alias(name) for name in FIELDS]
    return joined.select(
        F.when(kept, F.col("key")).alias("record_key"),
        F.when(kept, F.col("value")).alias("record_value"),
        F.when(dead, dead_letter_headers(known_ids, value_subject(settings.input_topic))).alias("headers"),
        dead.alias("dead"),
        *fields,
        mark.alias("mark_ms"),
        counted.alias("counted"),
        keep.alias("keep_ms"),
        # When it came on the gateways' clock (a reading without an ingest time: its own).
        F.unix_millis(F.coalesce(F.col("reading.ingest_time"), F.col("reading.event_time"))).alias("arrived_ms"),
        F.when(unknown, F.col(SCHEMA_ID)).alias("unknown_id"),
        F.when(unmarked, F.col("reading.device_id")).alias("unmarked_id"),
    )


def _judged(mark: Column, event_time: Column) -> tuple[Column, Column]:
    """``counted`` and ``keep_ms`` of a reading at ``event_time`` of a device whose watermark
    at the batch's start is ``mark`` (null: none yet, so counted)."""
    counted = mark.isNull() | (event_time > F.timestamp_millis(mark))
    # How long the ledger keeps the reading: by its event time while it may be in an open
    # window, a late one by when it came (its device's watermark then).
    return counted, F.when(counted, F.unix_millis(event_time)).otherwise(mark)


def with_recalled(records: DataFrame, back: DataFrame, ledger: Ledger) -> DataFrame:
    """``records`` (:func:`routed`) as routing would have made them had ``back``
    (``device_id``, ``mark_ms``: the rows the ledger just recalled from its cold store) been
    among the marks: each recalled device's readings judged against its own watermark, the
    other records as they were. A join of the cached batch with a few rows, where routing
    again would read, decode and join the batch with the whole table once more."""
    returned = F.broadcast(back.select(F.col("device_id").alias("back_id"), F.col("mark_ms").alias("back_ms")))
    joined = records.join(returned, F.col("unmarked_id") == F.col("back_id"), "left")
    came_back = F.col("back_id").isNotNull()
    mark = F.when(came_back, ledger.mark_of(F.col("back_ms"))).otherwise(F.col("mark_ms"))
    counted, keep = _judged(mark, F.col("event_time"))
    unmarked = F.when(~came_back, F.col("unmarked_id"))
    kept = F.col("dead") | ~counted | unmarked.isNotNull()
    return joined.select(
        F.when(kept, F.col("record_key")).alias("record_key"),
        F.when(kept, F.col("record_value")).alias("record_value"),
        "headers",
        "dead",
        *FIELDS,
        mark.alias("mark_ms"),
        counted.alias("counted"),
        keep.alias("keep_ms"),
        "arrived_ms",
        "unknown_id",
        unmarked.alias("unmarked_id"),
    )


def outcome(records: DataFrame) -> Outcome:
    reading = ~F.col("dead")
    row = records.agg(
        F.count(F.when(F.col("dead"), 1)).alias("dead"),
        F.count(F.when(reading & F.col("counted"), 1)).alias("counted"),
        F.count(F.when(reading & ~F.col("counted"), 1)).alias("behind"),
        F.max(F.unix_millis(F.col("event_time"))).alias("latest"),
        F.max(F.unix_millis(F.col("ingest_time"))).alias("latest_ingest"),
        F.collect_set("unknown_id").alias("unknown_ids"),  # nulls skipped: empty but for those records
        F.collect_set("unmarked_id").alias("unmarked"),
    ).first()
    assert row is not None
    return Outcome(
        row["dead"],
        row["counted"],
        row["behind"],
        row["latest"],
        row["latest_ingest"],
        sorted(row["unknown_ids"]),
        row["unmarked"],
    )


def first_late(records: DataFrame, seen: DataFrame, horizon: int, clock_ms: int | None) -> DataFrame:
    """The late readings of this batch that are neither copies of one another nor of a
    reading of their device the ledger still knows (:func:`~fluxgate_aggregator.ledger.remembered`
    with the gateways' clock ``clock_ms`` at the batch's start). Late readings are few: the
    ledger is scanned for those only."""
    behind = records.where(~F.col("dead") & ~F.col("counted")).dropDuplicates(list(IDENTITY_IN_METRIC))
    asked = F.broadcast(behind.select(*IDENTITY_IN_METRIC, "mark_ms"))
    seen = with_clock(seen, horizon, clock_ms)
    same_known = _same(seen, asked) & remembered(seen, asked["mark_ms"], horizon)
    known = seen.join(asked, same_known, "left_semi")
    return behind.join(known, _same(behind, known), "left_anti")


def _same(left: DataFrame, right: DataFrame) -> Column:
    # Null-safe: a reading without a sequence number equals its copy.
    return reduce(Column.__and__, [left[name].eqNullSafe(right[name]) for name in IDENTITY_IN_METRIC])


def moved(before: DataFrame, after: DataFrame, ledger: Ledger) -> DataFrame:
    """``device_id``, ``before_ms`` (null: none yet), ``after_ms``: the devices whose
    watermark the batch moved, from where to where."""
    start = ledger.mark_of(F.col("before_ms"))
    return (
        after.join(before.withColumnRenamed("mark_ms", "before_ms"), "device_id", "left")
        .select("device_id", start.alias("before_ms"), F.col("mark_ms").alias("after_ms"))
        .where(F.col("before_ms").isNull() | (F.col("after_ms") > F.col("before_ms")))
    )


def closed_windows(rows: DataFrame, settings: AggregatorSettings, moves: DataFrame) -> DataFrame:
    """The statistics of every window of a device whose end its watermark passed (``moves``:
    from ``before_ms``, exclusive, to ``after_ms``), from the counted ``rows`` that can be in
    one of them (no others: each is shuffled once), copies once."""
    size = settings.window.size_ms
    after, before = F.timestamp_millis(F.col("after_ms")), F.timestamp_millis(F.col("before_ms"))
    # In a window ending after `before` (so starting after before - size) and by `after`.
    can_close = (F.col("event_time") < after) & (
        F.col("before_ms").isNull() | (F.col("event_time") > F.timestamp_millis(F.col("before_ms") - F.lit(size)))
    )
    members = rows.where(F.col("counted")).join(moves, "device_id").where(can_close)
    stats = window_stats(members.dropDuplicates(list(IDENTITY_IN_METRIC)), settings)
    ended = (F.col("w.end") <= after) & (F.col("before_ms").isNull() | (F.col("w.end") > before))
    return stats.join(moves, "device_id").where(ended).drop("before_ms", "after_ms")


def horizon_ms(settings: AggregatorSettings) -> int:
    """How far behind the watermark the ledger keeps readings: a window still open may hold
    them (its size), and a copy may still arrive (the watermark delay, as Spark's
    ``dropDuplicatesWithinWatermark`` keeps an identity, and longer: a broker redelivers what
    a gateway stopped for a minute had produced but not acknowledged, while other devices
    moved the watermark on; a copy the ledger forgot would be written late although its
    reading was counted)."""
    window = settings.window
    return max(window.size_ms, duration_ms(window.watermark), window.dedup_horizon_ms)


def tagged(rows: DataFrame, topic: str, key: str = "key", value: str = "value") -> DataFrame:
    """Rows bound for ``topic``, in the Kafka sink's shape (key, value, headers, topic)."""
    headers = F.col("headers") if "headers" in rows.columns else F.array().cast(HEADERS)
    return rows.select(
        F.col(key).alias("key"), F.col(value).alias("value"), headers.alias("headers"), F.lit(topic).alias("topic")
    )


def router(
    settings: AggregatorSettings,
    contracts: Contracts,
    state: JobState,
    ledger: Ledger,
    write: Callable[[DataFrame], None],
    writers: WriterSchemas | None = None,
    before: Callable[[int], None] | None = None,
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function of the single query, over framed records
    (:func:`~fluxgate_aggregator.wire.framed`); ``writers`` by default: those of ``contracts``;
    ``before`` is called with the batch id before the batch reads anything."""
    schemas = writers or WriterSchemas(contracts.writers, contracts.listing)
    horizon = horizon_ms(settings)

    def decided(batch: DataFrame, marks: DataFrame) -> tuple[DataFrame, Outcome]:
        """The batch decoded with the writer schemas known now, routed, cached, counted."""
        known = schemas.schemas
        records = routed(with_reading(batch, known, contracts.reader), settings, sorted(known), ledger, marks)
        records = records.persist()
        return records, outcome(records)

    def warmed(batch: DataFrame, marks: DataFrame) -> tuple[DataFrame, Outcome, DataFrame]:
        """As :func:`decided`, with the marks it used; when the batch met devices the ledger
        had sent cold, their readings judged again with their rows back."""
        records, got = decided(batch, marks)
        back = ledger.recall(got.unmarked) if got.unmarked else None
        if back is None:
            return records, got, marks
        judged = with_recalled(records, back, ledger).persist()
        got = outcome(judged)  # computed from the cached records, before they go
        records.unpersist()
        return judged, got, ledger.marks()

    def read(batch: DataFrame) -> tuple[DataFrame, Outcome, DataFrame]:
        """As :func:`warmed`; when the batch met schema ids not known yet and the registry
        holds some of them now, decoded again with those (the registry asked once)."""
        records, got, marks = warmed(batch, ledger.marks())
        if not got.unknown_ids:
            return records, got, marks
        try:
            learned = schemas.learn(got.unknown_ids)
        except BaseException:
            records.unpersist()  # the batch fails, to be run again: nothing of it is judged
            raise
        if not learned:
            return records, got, marks
        records.unpersist()
        return warmed(batch, marks)  # readings that did not decode before may be of cold devices

    def route(batch: DataFrame, batch_id: int) -> None:
        if before is not None:
            before(batch_id)
        ledger.prepare(batch_id)
        with PHASE_SECONDS.labels("read").time():
            records, got, marks = read(batch)
        late: DataFrame | None = None
        try:
            readings = got.counted + got.behind
            # Every reading of the batch is recorded, late ones and copies too: a later copy
            # of any of them is then known (a late one's copy is not written twice).
            with PHASE_SECONDS.labels("ledger").time():
                ledger.record(records, got.latest_event_ms, readings)
                after = ledger.learn(records.where(~F.col("dead")), got.latest_ingest_ms) if readings else None
            outputs, late_count = [], 0
            if got.dead:
                outputs.append(
                    tagged(records.where(F.col("dead")), settings.deadletter_topic, "record_key", "record_value")
                )
            if got.behind:
                with PHASE_SECONDS.labels("late").time():
                    late = first_late(records, ledger.rows(), horizon, ledger.clock_ms).persist()
                    late_count = late.count()
                if settings.late_topic:
                    outputs.append(tagged(late, settings.late_topic, "record_key", "record_value"))
            if after is not None:  # with no reading, no device's watermark moved
                moves = moved(marks, after, ledger)
                windows = closed_windows(ledger.rows(this_batch=True), settings, moves)
                outputs.append(tagged(encoded(windows, settings, contracts), settings.output_topic))
            if outputs:
                with PHASE_SECONDS.labels("write").time():
                    write(reduce(DataFrame.unionByName, outputs))
            with PHASE_SECONDS.labels("commit").time():
                ledger.commit(marks, horizon)
        finally:
            if late is not None:
                late.unpersist()
            records.unpersist()
        state.settled(watermark_ms=ledger.watermark_ms, late=late_count, dead=got.dead, ledger_rows=ledger.row_count)

    return route
