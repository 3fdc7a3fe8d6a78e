"""The streaming job: two queries over the input topic.

* ``aggregates``: decode, keep the configured metric, drop redelivered copies of a reading
  (within the watermark), window per device on event time with a watermark, emit each
  window once (append) as a wire-format TemperatureAggregate.
* ``side-outputs``: a foreachBatch over the same decoded stream that writes what the
  aggregation cannot use: undecodable records to the dead-letter topic (original bytes,
  reason in headers) and readings behind the watermark to the late topic.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from fluxgate_aggregator import checkpoints
from fluxgate_aggregator.consumed import CONSUMED_FIELDS
from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.settings import SERVICE, AggregatorSettings
from fluxgate_aggregator.wire import MAGIC_OK, SCHEMA_ID, decode, encode, frame_columns
from fluxgate_core import deadletter

# What makes two records the same reading. The gateways are at-least-once (QoS 1
# redelivery, a proxy restart, a CoAP re-registration, a device resending), so the same
# reading can arrive twice; two different values at the same millisecond are two readings.
IDENTITY = ("device_id", "metric", "event_time", "value", "sequence")
# The aggregation's checkpoint, versioned by plan: the deduplication added a stateful
# operator, and Spark refuses to resume a plan from a checkpoint of another one.
AGGREGATES_CHECKPOINT = "aggregates-v2"

LATE_SEEN_LIMIT = 100_000

STATS = ("count", "min", "max", "mean", "stddev", "first_event_time", "last_event_time", "unit")


@dataclass
class JobState:
    """What the driver knows between batches: the aggregation's watermark, side-output counts."""

    watermark_ms: int | None = None
    late_rows: int = 0
    dead_letters: int = 0
    # Identities of the late readings written lately, oldest first: a copy of one arriving
    # in a later batch is not written again. Bounded; kept in the driver only, so after a
    # restart a late copy of a reading from before may be written once more.
    late_seen: OrderedDict[tuple[Any, ...], None] = field(default_factory=OrderedDict)
    queries: list[StreamingQuery] = field(default_factory=list)
    starters: dict[str, Callable[[], StreamingQuery]] = field(default_factory=dict)

    def failed(self) -> list[StreamingQuery]:
        return [query for query in self.queries if not query.isActive]

    def restart(self, query: StreamingQuery) -> StreamingQuery:
        """Start ``query`` again from its checkpoint, in place of the stopped one."""
        again = self.starters[query.name]()
        self.queries = [again if old is query else old for old in self.queries]
        return again


def kafka_options(settings: AggregatorSettings) -> dict[str, str]:
    """Options for Spark's Kafka connector (a Java client): bootstrap and security protocol,
    plus ``kafka.extra`` passed through, where Java-only properties such as
    ``sasl.jaas.config`` or ``ssl.truststore.location`` go."""
    options = {
        "kafka.bootstrap.servers": settings.kafka.bootstrap_servers,
        "kafka.security.protocol": settings.kafka.security_protocol,
    }
    if settings.kafka.sasl_mechanism:
        options["kafka.sasl.mechanism"] = settings.kafka.sasl_mechanism
    options.update({f"kafka.{key}": value for key, value in settings.kafka.extra.items()})
    return options


def read_decoded(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts) -> DataFrame:
    raw = (
        spark.readStream.format("kafka")
        .options(**kafka_options(settings))
        .option("subscribe", settings.input_topic)
        .option("startingOffsets", settings.starting_offsets)
        .option("failOnDataLoss", "false")
    )
    if settings.spark.max_offsets_per_trigger:
        raw = raw.option("maxOffsetsPerTrigger", str(settings.spark.max_offsets_per_trigger))
    framed = raw.load().select("key", "value", "topic", "partition", "offset", *_aliased(frame_columns(F.col("value"))))
    reading = decode(F.col("body"), F.col(SCHEMA_ID), contracts.writers, contracts.reader)
    return framed.withColumn("reading", F.when(F.col(MAGIC_OK), reading))


def _aliased(columns: dict[str, Column]) -> list[Column]:
    return [column.alias(name) for name, column in columns.items()]


def aggregate(decoded: DataFrame, settings: AggregatorSettings, contracts: Contracts) -> DataFrame:
    window = settings.window
    slide = window.slide or window.size
    # Only the declared fields go on: using another one fails at analysis, not in a
    # producer's release, until it is added to the consumer contract.
    readings = decoded.where(F.col("reading").isNotNull()).select(
        *[F.col(f"reading.{name}").alias(name) for name in CONSUMED_FIELDS]
    )
    stats = (
        readings.where(F.col("metric") == settings.metric)
        .withWatermark("event_time", window.watermark)
        # Spark keeps each identity until the watermark passes its event time, and drops a
        # reading already behind the watermark here (the side outputs send it to the late topic).
        .dropDuplicatesWithinWatermark(list(IDENTITY))
        .groupBy(F.col("device_id"), F.window("event_time", window.size, slide).alias("w"))
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("value").alias("min"),
            F.max("value").alias("max"),
            F.avg("value").alias("mean"),
            F.stddev_pop("value").alias("stddev"),
            F.min("event_time").alias("first_event_time"),
            F.max("event_time").alias("last_event_time"),
            F.max("unit").alias("unit"),  # deterministic, unlike first(); one unit per device in practice
        )
    )
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


def rejection_reason(known_ids: list[int]) -> Column:
    schema_id = F.col(SCHEMA_ID).cast("string")
    return (
        F.when(~F.col(MAGIC_OK), F.lit("not Confluent wire format: expected magic byte 0 and a 4-byte schema id"))
        .when(
            ~F.col(SCHEMA_ID).isin(known_ids),
            F.concat(F.lit("unknown schema id "), schema_id, F.lit(": not registered when the job started")),
        )
        .otherwise(F.concat(F.lit("Avro body does not decode with schema id "), schema_id))
    )


def dead_letter_rows(batch: DataFrame, known_ids: list[int]) -> DataFrame:
    """Rejected records with their original key and bytes, and why, in ``fluxgate.dlq.*`` headers."""
    source = F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))
    headers = F.array(
        _header(deadletter.REASON, rejection_reason(known_ids)),
        _header(deadletter.ERROR_CLASS, F.lit("SerializationError")),
        _header(deadletter.SOURCE, source),
        _header(deadletter.SERVICE, F.lit(SERVICE)),
        _header(deadletter.TIMESTAMP, F.unix_millis(F.current_timestamp()).cast("string")),
    )
    return batch.where(F.col("reading").isNull()).select("key", "value", headers.alias("headers"))


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))


def late_rows(batch: DataFrame, settings: AggregatorSettings, watermark_ms: int) -> DataFrame:
    """Readings of the metric at or behind the watermark, once each: the deduplication in
    front of the windows drops them (a window still open would not get them either), so
    they go to the late topic instead of nowhere. Copies within the batch are dropped here;
    :func:`side_outputs` drops those of earlier batches."""
    event_ms = F.unix_millis(F.col("reading.event_time"))
    late = batch.where(
        F.col("reading").isNotNull() & (F.col("reading.metric") == settings.metric) & (event_ms <= F.lit(watermark_ms))
    )
    identity = [F.col(f"reading.{name}").alias(f"_id_{name}") for name in IDENTITY]
    return late.select("key", "value", *identity).dropDuplicates([f"_id_{name}" for name in IDENTITY])


def side_outputs(
    settings: AggregatorSettings, contracts: Contracts, state: JobState
) -> Callable[[DataFrame, int], None]:
    known_ids = sorted(contracts.writers)
    options = kafka_options(settings)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            rejected = dead_letter_rows(batch, known_ids)
            state.dead_letters += _write(rejected, options, settings.deadletter_topic)
            if state.watermark_ms is not None:
                late = first_sightings(late_rows(batch, settings, state.watermark_ms), state)
                if late and settings.late_topic:
                    _write(batch.sparkSession.createDataFrame(late, LATE_ROW), options, settings.late_topic)
                state.late_rows += len(late)
        finally:
            batch.unpersist()

    return write_batch


LATE_ROW = "key binary, value binary"


def first_sightings(late: DataFrame, state: JobState) -> list[tuple[bytes, bytes]]:
    """The late readings of this batch not written before, as (key, value); remembers them.
    Collected to the driver: late readings are a small fraction of a batch."""
    fresh = []
    for row in late.collect():
        identity = tuple(row[f"_id_{name}"] for name in IDENTITY)
        if identity not in state.late_seen:
            state.late_seen[identity] = None
            fresh.append((row["key"], row["value"]))
    while len(state.late_seen) > LATE_SEEN_LIMIT:
        state.late_seen.popitem(last=False)
    return fresh


def _write(rows: DataFrame, options: dict[str, str], topic: str) -> int:
    count = rows.count()
    if count:
        rows.write.format("kafka").options(**options).option("topic", topic).save()
    return count


def start(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, state: JobState) -> JobState:
    """Start both queries, each with its own checkpoint under ``checkpoint_dir``."""
    state.starters = starters(spark, settings, contracts, state)
    state.queries = [begin() for begin in state.starters.values()]
    return state


def starters(
    spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, state: JobState
) -> dict[str, Callable[[], StreamingQuery]]:
    """How to start each query by name; calling one again resumes it from its checkpoint."""
    decoded = read_decoded(spark, settings, contracts)
    trigger: dict[str, Any] = {"processingTime": settings.spark.trigger_interval}

    def aggregates() -> StreamingQuery:
        checkpoint = prepared_checkpoint(spark, settings, AGGREGATES_CHECKPOINT)
        return (
            aggregate(decoded, settings, contracts)
            .writeStream.queryName("aggregates")
            .format("kafka")
            .options(**kafka_options(settings))
            .option("topic", settings.output_topic)
            .option("checkpointLocation", checkpoint)
            .outputMode("append")
            .trigger(**trigger)
            .start()
        )

    def sides() -> StreamingQuery:
        checkpoint = prepared_checkpoint(spark, settings, "side-outputs")
        return (
            decoded.writeStream.queryName("side-outputs")
            .foreachBatch(side_outputs(settings, contracts, state))
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    return {"aggregates": aggregates, "side-outputs": sides}


def prepared_checkpoint(spark: SparkSession, settings: AggregatorSettings, query: str) -> str:
    checkpoint = checkpoints.location(settings.checkpoint_dir, query)
    checkpoints.remove_abandoned_temp_files(spark, checkpoint)
    return checkpoint
