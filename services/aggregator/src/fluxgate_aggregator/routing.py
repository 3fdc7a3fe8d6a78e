"""One micro-batch of the single query: every record read and decoded once, then routed
against the one watermark this batch uses.

* not decodable -> the dead-letter topic (original key and bytes, reason in headers);
* a copy of a reading already accepted (this batch or one the :class:`Ledger` remembers) -> dropped;
* at or behind the watermark -> the late topic (its original bytes);
* otherwise counted: it joins the ledger, and every window the new watermark closes is
  aggregated from the ledger's counted readings and written, once.

A reading therefore ends either counted or late, never both, and the decision is the same
when the batch is run again after a crash (same offsets, same ledger).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.deadletters import dead_letter_rows
from fluxgate_aggregator.ledger import ROW_COLUMNS, Ledger
from fluxgate_aggregator.settings import AggregatorSettings, duration_ms
from fluxgate_aggregator.windows import encoded, window_stats

if TYPE_CHECKING:
    from fluxgate_aggregator.job import JobState

# A reading's identity without the metric: the ledger holds one metric only.
IDENTITY = ("device_id", "event_time", "value", "sequence")
HEADERS = "array<struct<key:string,value:binary>>"


@dataclass(frozen=True)
class Outcome:
    """What a batch accepted, as the driver sees it after the batch's first job."""

    accepted: int
    late: int
    latest_event_ms: int | None


def readings(batch: DataFrame, metric: str) -> DataFrame:
    """The batch's decoded readings of ``metric``, with their record's key and bytes."""
    fields = [F.col(f"reading.{name}").alias(name) for name in ("device_id", "event_time", "value", "sequence", "unit")]
    return batch.where(F.col("reading").isNotNull() & (F.col("reading.metric") == metric)).select(
        F.col("key").alias("record_key"), F.col("value").alias("record_value"), *fields
    )


def accepted(batch: DataFrame, seen: DataFrame, metric: str, watermark_ms: int) -> DataFrame:
    """First sightings: readings of this batch not seen before (nor twice in it), each marked
    ``counted`` (after the watermark) or not (late)."""
    fresh = readings(batch, metric).dropDuplicates(list(IDENTITY))
    same = reduce(Column.__and__, [fresh[name].eqNullSafe(seen[name]) for name in IDENTITY])
    return fresh.join(seen, same, "left_anti").withColumn("counted", F.col("event_time") > _at(watermark_ms))


def outcome(fresh: DataFrame) -> Outcome:
    row = fresh.agg(
        F.count(F.lit(1)).alias("accepted"),
        F.count(F.when(~F.col("counted"), 1)).alias("late"),
        F.max(F.unix_millis(F.col("event_time"))).alias("latest"),
    ).first()
    assert row is not None
    return Outcome(row["accepted"], row["late"], row["latest"])


def closed_windows(rows: DataFrame, settings: AggregatorSettings, after_ms: int, upto_ms: int) -> DataFrame:
    """The statistics of every window whose end the watermark passed in moving from
    ``after_ms`` to ``upto_ms``, from the counted ``rows`` (only those that can be in one)."""
    members = rows.where(
        F.col("counted")
        & (F.col("event_time") > _at(after_ms - settings.window.size_ms))
        & (F.col("event_time") < _at(upto_ms))
    )
    closed = (F.col("w.end") > _at(after_ms)) & (F.col("w.end") <= _at(upto_ms))
    return window_stats(members, settings).where(closed)


def _at(epoch_ms: int) -> Column:
    return F.timestamp_millis(F.lit(epoch_ms))


def next_watermark(current_ms: int, latest_event_ms: int | None, delay_ms: int) -> int:
    """Spark's rule: the latest event time seen minus the delay, never moving back."""
    return current_ms if latest_event_ms is None else max(current_ms, latest_event_ms - delay_ms)


def horizon_ms(settings: AggregatorSettings) -> int:
    """How far behind the watermark the ledger keeps readings: a window still open may hold
    them (its size), and a copy may still arrive (the watermark delay, as Spark's
    ``dropDuplicatesWithinWatermark`` keeps an identity)."""
    return max(settings.window.size_ms, duration_ms(settings.window.watermark))


def tagged(rows: DataFrame, topic: str) -> DataFrame:
    """``key``/``value``(/``headers``) rows bound for ``topic``, in the Kafka sink's shape."""
    headers = F.col("headers") if "headers" in rows.columns else F.array().cast(HEADERS)
    return rows.select("key", "value", headers.alias("headers"), F.lit(topic).alias("topic"))


def router(
    settings: AggregatorSettings,
    contracts: Contracts,
    state: JobState,
    ledger: Ledger,
    write: Callable[[DataFrame], None],
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function of the single query."""
    known_ids = sorted(contracts.writers)
    delay_ms = duration_ms(settings.window.watermark)
    horizon = horizon_ms(settings)

    def route(batch: DataFrame, batch_id: int) -> None:
        ledger.prepare(batch_id)
        watermark = ledger.watermark_ms
        batch.persist()
        seen = ledger.rows(horizon)
        fresh = accepted(batch, seen, settings.metric, watermark).persist()
        try:
            got = outcome(fresh)
            upto = next_watermark(watermark, got.latest_event_ms, delay_ms)
            rejected = dead_letter_rows(batch, known_ids)
            dead = rejected.count()
            ledger.record(fresh, got.latest_event_ms, got.accepted)
            outputs = []
            if dead:
                outputs.append(tagged(rejected, settings.deadletter_topic))
            if got.late and settings.late_topic:
                late = fresh.where(~F.col("counted")).select(
                    F.col("record_key").alias("key"), F.col("record_value").alias("value")
                )
                outputs.append(tagged(late, settings.late_topic))
            if upto > watermark:
                rows = seen.unionByName(fresh.select(*ROW_COLUMNS))
                windows = encoded(closed_windows(rows, settings, watermark, upto), settings, contracts)
                outputs.append(tagged(windows, settings.output_topic))
            if outputs:
                write(reduce(DataFrame.unionByName, outputs))
            ledger.commit(upto, horizon)
        finally:
            fresh.unpersist()
            batch.unpersist()
        state.settled(watermark_ms=upto, late=got.late, dead=dead, ledger_rows=ledger.row_count)

    return route
