"""The streaming job: one query over the input topic, each record read and decoded once.

A ``foreachBatch`` (:mod:`fluxgate_aggregator.micro_batch`) routes every micro-batch against
the one watermark that batch uses: undecodable records to the dead-letter topic, readings
at or behind the watermark to the late topic, the others counted once (redelivered copies
dropped) into event-time windows per device, each window written once as a wire-format
TemperatureAggregate when the watermark passes its end. The window state and the
watermark are the job's own (:class:`~fluxgate_aggregator.ledger.Ledger`), next to the
query's checkpoint.

:func:`aggregate` is the same aggregation with Spark's own stateful operators, on a
streaming DataFrame: the benchmark's baseline and the persisters' contract tests use it.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from fluxgate_aggregator import checkpoints
from fluxgate_aggregator.consumed import CONSUMED_FIELDS, IDENTITY
from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.kafka_access import spark_kafka_options, spark_sink_options
from fluxgate_aggregator.ledger import Ledger
from fluxgate_aggregator.losses import batch_starts
from fluxgate_aggregator.micro_batch import router
from fluxgate_aggregator.settings import AggregatorSettings, duration_ms
from fluxgate_aggregator.window_stats import encoded, window_stats
from fluxgate_aggregator.wire import framed, with_reading
from fluxgate_aggregator.writers import WriterSchemas

# The query's checkpoint, versioned by plan: Spark refuses to resume a plan from a
# checkpoint of another one. v3: one query (foreachBatch) in place of the aggregation
# (v2) and the side outputs; its window state is its own, in ``<checkpoint>/ledger``.
AGGREGATES_CHECKPOINT = "aggregates-v3"
QUERY = "aggregates"


def kafka_options(settings: AggregatorSettings) -> dict[str, str]:
    """Options for Spark's Kafka connector (a Java client): brokers, security protocol, the
    credentials as ``sasl.jaas.config``, the CA as a PEM truststore, and ``kafka.java_extra``
    (see :mod:`fluxgate_aggregator.kafka_access`). Built anew for each start of the query and
    each write, so a rotated ``sasl_password_file`` is picked up."""
    return spark_kafka_options(settings.kafka)


def kafka_sink_options(settings: AggregatorSettings) -> dict[str, str]:
    """:func:`kafka_options`, and the producer's ``linger.ms`` and ``compression.type`` from the settings."""
    return spark_sink_options(settings.kafka)


def read_decoded(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts) -> DataFrame:
    """The input topic, decoded in the streaming plan with the writer schemas of ``contracts``
    (the baseline's path; the job decodes in each micro-batch, see :func:`read_framed`)."""
    return with_reading(read_framed(spark, settings), contracts.writers, contracts.reader)


def read_framed(spark: SparkSession, settings: AggregatorSettings) -> DataFrame:
    """The input topic, framed but not decoded: each micro-batch decodes its records with the
    writer schemas known when it runs, a version registered since the start included."""
    raw = (
        spark.readStream.format("kafka")
        .options(**kafka_options(settings))
        .option("subscribe", settings.input_topic)
        .option("startingOffsets", settings.starting_offsets)
        # Offsets removed before they were read are skipped, not fatal (a query failing on them
        # would fail at every restart); each batch reports them first (losses.py).
        .option("failOnDataLoss", "false")
        .option("maxOffsetsPerTrigger", str(settings.spark.max_offsets_per_trigger))
    )
    return framed(raw.load())


def decoded(raw: DataFrame, contracts: Contracts) -> DataFrame:
    """Kafka records (``key``, ``value``, ``topic``, ``partition``, ``offset``, streaming or
    not) with ``reading``: the value decoded, null when it does not decode."""
    return with_reading(framed(raw), contracts.writers, contracts.reader)


def aggregate(decoded: DataFrame, settings: AggregatorSettings, contracts: Contracts) -> DataFrame:
    """The aggregation with Spark's stateful operators on a streaming ``decoded``: watermark,
    ``dropDuplicatesWithinWatermark``, windows, append mode. Not the job's path (see the module)."""
    # Only the declared fields go on: using another one fails at analysis, not in a
    # producer's release, until it is added to the consumer contract.
    readings = decoded.where(F.col("reading").isNotNull()).select(
        *[F.col(f"reading.{name}").alias(name) for name in CONSUMED_FIELDS]
    )
    deduped = (
        readings.where(F.col("metric") == settings.metric)
        .withWatermark("event_time", settings.window.watermark)
        .dropDuplicatesWithinWatermark(list(IDENTITY))
    )
    return encoded(window_stats(deduped, settings), settings, contracts)


def start(spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, state: JobState) -> JobState:
    """Start the query from its checkpoint under ``checkpoint_dir``."""
    state.starters = starters(spark, settings, contracts, state)
    state.queries = [begin() for begin in state.starters.values()]
    return state


def starters(
    spark: SparkSession, settings: AggregatorSettings, contracts: Contracts, state: JobState
) -> dict[str, Callable[[], StreamingQuery]]:
    """How to start the query by name; calling it again resumes it from its checkpoint."""
    if state.writers is None:
        state.writers = WriterSchemas(contracts.writers, contracts.listing)
    writers = state.writers

    def write(rows: DataFrame) -> None:
        # The aggregates, late readings and dead letters of a batch: one write, one producer
        # (Spark caches it by its options; a rotated password makes a new one).
        rows.write.format("kafka").options(**kafka_sink_options(settings)).save()

    checkpoint = checkpoints.location(settings.checkpoint_dir, AGGREGATES_CHECKPOINT)
    if state.ledger is not None:
        state.ledger.reset()  # started again: the former plan's cache goes
    state.ledger = ledger = Ledger(spark, f"{checkpoint}/ledger", duration_ms(settings.window.watermark))

    def check_losses(batch_id: int) -> None:
        # Where this batch starts is where the one before it ended, in the offset log.
        if state.losses is not None and batch_id > 0:
            entry = checkpoints.read_text(spark, f"{checkpoint}/offsets/{batch_id - 1}")
            state.losses.check(batch_id, batch_starts(entry))

    def aggregates() -> StreamingQuery:
        prepared_checkpoint(spark, settings, AGGREGATES_CHECKPOINT)
        # Each start reads the ledger back from the checkpoint: the query resumes from there.
        ledger.reset()
        # The source's options (the password from its file) as they are now.
        frames = read_framed(spark, settings)
        return (
            frames.writeStream.queryName(QUERY)
            .foreachBatch(router(settings, contracts, state, ledger, write, writers, check_losses))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=settings.spark.trigger_interval)
            .start()
        )

    return {QUERY: aggregates}


def prepared_checkpoint(spark: SparkSession, settings: AggregatorSettings, query: str) -> str:
    checkpoint = checkpoints.location(settings.checkpoint_dir, query)
    checkpoints.remove_abandoned_temp_files(spark, checkpoint)
    return checkpoint
