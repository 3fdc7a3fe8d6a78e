"""One micro-batch of the single query: every record read and decoded once, then routed
against the one watermark this batch uses.

* not decodable -> the dead-letter topic (original key and bytes, reason in headers);
* at or behind the watermark -> the late topic (original bytes), unless it is a copy of a
  reading already counted or written late (the :class:`Ledger` remembers them);
* otherwise counted: it joins the ledger, and every window the new watermark closes is
  aggregated from the ledger's counted readings, copies once, and written once.

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
from fluxgate_aggregator.ledger import Ledger
from fluxgate_aggregator.settings import AggregatorSettings, duration_ms
from fluxgate_aggregator.window_stats import encoded, window_stats
from fluxgate_aggregator.wire import MAGIC_OK, SCHEMA_ID, with_reading
from fluxgate_aggregator.writers import WriterSchemas
from fluxgate_core.serde import value_subject

if TYPE_CHECKING:
    from fluxgate_aggregator.driver_state import JobState

FIELDS = ("device_id", "event_time", "value", "sequence", "unit")
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
    behind: int  # at or behind the watermark, copies included
    latest_event_ms: int | None
    unknown_ids: list[int]  # schema ids of wire-format records the batch had no writer schema for


def routed(batch: DataFrame, settings: AggregatorSettings, known_ids: list[int], watermark_ms: int) -> DataFrame:
    """What routing needs of each record, flat: the reading's fields and ``counted`` (after
    the watermark) for the readings of the metric; the key and bytes of those that may be
    written as they came (the undecodable, with dead-letter headers, and the late). Cached
    (the batch's only copy) and kept as the batch's ledger entry, so it is kept slim."""
    dead = F.col("reading").isNull()
    counted = F.col("reading.event_time") > _at(watermark_ms)
    as_is = dead | ~counted
    unknown = dead & F.col(MAGIC_OK) & ~F.col(SCHEMA_ID).isin(known_ids)
    fields = [F.col(f"reading.{name}").alias(name) for name in FIELDS]
    return batch.where(dead | (F.col("reading.metric") == settings.metric)).select(
        F.when(as_is, F.col("key")).alias("record_key"),
        F.when(as_is, F.col("value")).alias("record_value"),
        F.when(dead, dead_letter_headers(known_ids, value_subject(settings.input_topic))).alias("headers"),
        dead.alias("dead"),
        *fields,
        counted.alias("counted"),
        F.when(unknown, F.col(SCHEMA_ID)).alias("unknown_id"),
    )


def outcome(records: DataFrame) -> Outcome:
    reading = ~F.col("dead")
    row = records.agg(
        F.count(F.when(F.col("dead"), 1)).alias("dead"),
        F.count(F.when(reading & F.col("counted"), 1)).alias("counted"),
        F.count(F.when(reading & ~F.col("counted"), 1)).alias("behind"),
        F.max(F.unix_millis(F.col("event_time"))).alias("latest"),
        F.collect_set("unknown_id").alias("unknown_ids"),  # nulls skipped: empty but for those records
    ).first()
    assert row is not None
    return Outcome(row["dead"], row["counted"], row["behind"], row["latest"], sorted(row["unknown_ids"]))


def first_late(records: DataFrame, seen: DataFrame) -> DataFrame:
    """The late readings of this batch that are neither copies of one another nor of a
    reading the ledger holds. Late readings are few: the ledger is scanned for those only."""
    behind = records.where(~F.col("dead") & ~F.col("counted")).dropDuplicates(list(IDENTITY_IN_METRIC))
    known = seen.join(F.broadcast(behind.select(*IDENTITY_IN_METRIC)), _same(seen, behind), "left_semi")
    return behind.join(known, _same(behind, known), "left_anti")


def _same(left: DataFrame, right: DataFrame) -> Column:
    # Null-safe: a reading without a sequence number equals its copy.
    return reduce(Column.__and__, [left[name].eqNullSafe(right[name]) for name in IDENTITY_IN_METRIC])


def closing_ends(settings: AggregatorSettings, after_ms: int, upto_ms: int) -> tuple[int, int] | None:
    """The first and last window end (epoch ms) the watermark passes in moving from
    ``after_ms`` to ``upto_ms``; None when it passes none. Spark's windows start at
    multiples of the slide, so they end at those plus the size."""
    size, slide = settings.window.size_ms, settings.window.slide_ms
    first = ((after_ms - size) // slide + 1) * slide + size
    last = ((upto_ms - size) // slide) * slide + size
    return (first, last) if first <= last else None


def closed_windows(rows: DataFrame, settings: AggregatorSettings, ends: tuple[int, int]) -> DataFrame:
    """The statistics of every window ending from ``ends[0]`` to ``ends[1]``, from the counted
    ``rows`` that can be in one of them (no others: each is shuffled once), copies once."""
    first, last = ends
    members = rows.where(
        F.col("counted")
        & (F.col("event_time") >= _at(first - settings.window.size_ms))
        & (F.col("event_time") < _at(last))
    ).dropDuplicates(list(IDENTITY_IN_METRIC))
    closed = (F.col("w.end") >= _at(first)) & (F.col("w.end") <= _at(last))
    return window_stats(members, settings).where(closed)


def _at(epoch_ms: int) -> Column:
    return F.timestamp_millis(F.lit(epoch_ms))


def next_watermark(current_ms: int, latest_event_ms: int | None, delay_ms: int) -> int:
    """Spark's rule: the latest event time seen minus the delay, never moving back."""
    return current_ms if latest_event_ms is None else max(current_ms, latest_event_ms - delay_ms)


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
    delay_ms = duration_ms(settings.window.watermark)
    horizon = horizon_ms(settings)

    def decided(batch: DataFrame, watermark: int) -> tuple[DataFrame, Outcome]:
        """The batch decoded with the writer schemas known now, routed, cached, counted."""
        known = schemas.schemas
        records = routed(with_reading(batch, known, contracts.reader), settings, sorted(known), watermark)
        records = records.persist()
        return records, outcome(records)

    def read(batch: DataFrame, watermark: int) -> tuple[DataFrame, Outcome]:
        """As :func:`decided`; when the batch met schema ids not known yet and the registry
        holds some of them now, decoded again with those (the registry asked once)."""
        records, got = decided(batch, watermark)
        if not got.unknown_ids:
            return records, got
        try:
            learned = schemas.learn(got.unknown_ids)
        except BaseException:
            records.unpersist()  # the batch fails, to be run again: nothing of it is judged
            raise
        if not learned:
            return records, got
        records.unpersist()
        return decided(batch, watermark)

    def route(batch: DataFrame, batch_id: int) -> None:
        if before is not None:
            before(batch_id)
        ledger.prepare(batch_id)
        watermark = ledger.watermark_ms
        with PHASE_SECONDS.labels("read").time():
            records, got = read(batch, watermark)
        late: DataFrame | None = None
        kept = False
        try:
            upto = next_watermark(watermark, got.latest_event_ms, delay_ms)
            # Every reading of the batch is recorded, late ones and copies too: a later copy
            # of any of them is then known (a late one's copy is not written twice).
            with PHASE_SECONDS.labels("ledger").time():
                kept = ledger.record(records, got.latest_event_ms, got.counted + got.behind)
            outputs, late_count = [], 0
            if got.dead:
                outputs.append(
                    tagged(records.where(F.col("dead")), settings.deadletter_topic, "record_key", "record_value")
                )
            if got.behind:
                with PHASE_SECONDS.labels("late").time():
                    late = first_late(records, ledger.rows(watermark - horizon)).persist()
                    late_count = late.count()
                if settings.late_topic:
                    outputs.append(tagged(late, settings.late_topic, "record_key", "record_value"))
            ends = closing_ends(settings, watermark, upto)
            if ends is not None:
                rows = ledger.rows(ends[0] - settings.window.size_ms - 1, this_batch=True)
                windows = encoded(closed_windows(rows, settings, ends), settings, contracts)
                outputs.append(tagged(windows, settings.output_topic))
            if outputs:
                with PHASE_SECONDS.labels("write").time():
                    write(reduce(DataFrame.unionByName, outputs))
            with PHASE_SECONDS.labels("commit").time():
                ledger.commit(upto, horizon)
        finally:
            if late is not None:
                late.unpersist()
            if not kept:
                records.unpersist()
        state.settled(watermark_ms=upto, late=late_count, dead=got.dead, ledger_rows=ledger.row_count)

    return route
