"""The statistics of a window and their wire format, on any DataFrame of readings: a
micro-batch's in the job, a streaming one in the benchmark's baseline and the contract tests."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.settings import AggregatorSettings
from fluxgate_aggregator.wire import encode

STATS = ("count", "min", "max", "mean", "stddev", "first_event_time", "last_event_time", "unit")


def window_stats(readings: DataFrame, settings: AggregatorSettings) -> DataFrame:
    """One row per device and event-time window (column ``w``) of ``readings``."""
    window = settings.window
    slide = window.slide or window.size
    return readings.groupBy(F.col("device_id"), F.window("event_time", window.size, slide).alias("w")).agg(
        F.count(F.lit(1)).alias("count"),
        F.min("value").alias("min"),
        F.max("value").alias("max"),
        F.avg("value").alias("mean"),
        F.stddev_pop("value").alias("stddev"),
        F.min("event_time").alias("first_event_time"),
        F.max("event_time").alias("last_event_time"),
        F.max("unit").alias("unit"),  # deterministic, unlike first(); one unit per device in practice
    )


def encoded(stats: DataFrame, settings: AggregatorSettings, contracts: Contracts) -> DataFrame:
    """Window statistics as wire-format ``TemperatureAggregate`` values keyed by device id."""
    record = F.struct(
        F.col("device_id"),
        F.lit(settings.metric).alias("metric"),
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        *[F.col(name) for name in STATS],
    )
    return stats.select(
        F.col("device_id").cast("binary").alias("key"),
        encode(record, contracts.output, contracts.output_id).alias("value"),
    )
