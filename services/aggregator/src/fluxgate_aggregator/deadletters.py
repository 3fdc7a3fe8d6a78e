"""Records the job cannot decode, as dead letters: original key and bytes, reason in headers."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from fluxgate_aggregator.settings import SERVICE
from fluxgate_aggregator.wire import MAGIC_OK, SCHEMA_ID
from fluxgate_core import deadletter


def rejection_reason(known_ids: list[int], subject: str) -> Column:
    """Why a record did not decode; ``known_ids`` are the subject's ids the batch looked up."""
    schema_id = F.col(SCHEMA_ID).cast("string")
    return (
        F.when(~F.col(MAGIC_OK), F.lit("not Confluent wire format: expected magic byte 0 and a 4-byte schema id"))
        .when(
            ~F.col(SCHEMA_ID).isin(known_ids),
            F.concat(F.lit("unknown schema id "), schema_id, F.lit(f": not registered under {subject}")),
        )
        .otherwise(F.concat(F.lit("Avro body does not decode with schema id "), schema_id))
    )


def dead_letter_headers(known_ids: list[int], subject: str) -> Column:
    """Why a record was rejected and where it came from, as ``fluxgate.dlq.*`` Kafka headers."""
    source = F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))
    return F.array(
        _header(deadletter.REASON, rejection_reason(known_ids, subject)),
        _header(deadletter.ERROR_CLASS, F.lit("SerializationError")),
        _header(deadletter.SOURCE, source),
        _header(deadletter.SERVICE, F.lit(SERVICE)),
        _header(deadletter.TIMESTAMP, F.unix_millis(F.current_timestamp()).cast("string")),
    )


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))
