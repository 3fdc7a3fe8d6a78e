"""Confluent wire format in Spark SQL: no Python on the hot path, only Catalyst expressions.

A value is magic byte 0, a 4-byte big-endian schema id, then the Avro body. Decoding
picks the writer schema by id among those registered for the input subject (as each
micro-batch knows them: :mod:`fluxgate_aggregator.writers`) and resolves it to the reader
schema the aggregator was written against.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

MAGIC_OK = "magic_ok"
SCHEMA_ID = "schema_id"
DECODED = "decoded"  # the body decoded, before undecodable ones are made null


def frame_columns(value: Column) -> dict[str, Column]:
    """Header fields and body of a wire-format value column."""
    return {
        MAGIC_OK: (F.length(value) >= 5) & (F.substring(value, 1, 1) == F.lit(bytearray(b"\x00"))),
        SCHEMA_ID: F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long"),
        "body": F.expr("substring(value, 6, length(value) - 5)"),
    }


def framed(raw: DataFrame) -> DataFrame:
    """Kafka records (``key``, ``value``, ``topic``, ``partition``, ``offset``) with the wire
    format's header fields and body: what the query hands each micro-batch."""
    header = [column.alias(name) for name, column in frame_columns(F.col("value")).items()]
    return raw.select("key", "value", "topic", "partition", "offset", *header)


def with_reading(frames: DataFrame, writers: Mapping[int, str], reader: str) -> DataFrame:
    """``frames`` with ``reading``: the value decoded with its writer schema among
    ``writers``, null when it does not decode (or its id is not among them).

    Each body is decoded once, in a generator (the explode of a one-element array): Catalyst
    pushes a filter on ``reading`` below a projection by copying its expression into the
    filter, and evaluates a ``CASE`` branch and its condition apart, so the same
    ``from_avro`` ran up to six times a record (a filter on the metric, then the projection):
    the routing's projection cost 14 CPU µs a record, now 6
    (bench/results/2026-12-02-aggregator-decode-once.md). A filter cannot pass a generator
    that makes the column it reads."""
    body = F.when(F.col(MAGIC_OK), F.col("body"))
    one = frames.select("*", F.explode(F.array(decode(body, F.col(SCHEMA_ID), writers, reader))).alias(DECODED))
    # PERMISSIVE turns a body that does not decode into a struct of nulls, not a null:
    # a field the schema never allows to be null tells the two apart.
    decoded = F.col(DECODED)
    return one.withColumn("reading", F.when(decoded[required_field(reader)].isNotNull(), decoded)).drop(DECODED)


def decode(body: Column, schema_id: Column, writers: Mapping[int, str], reader: str) -> Column:
    """The body decoded with the writer schema its id names (null when no writer has that id;
    a struct of nulls when the body does not decode). Each ``from_avro`` sees a null body
    unless the id is its writer's, so a record is decoded by one writer at most."""
    options = {"mode": "PERMISSIVE", "avroSchema": reader}
    assert writers, "at least one writer schema"
    return F.coalesce(
        *[
            from_avro(F.when(schema_id == writer_id, body), writer_schema, options)
            for writer_id, writer_schema in sorted(writers.items())
        ]
    )


def required_field(schema_text: str) -> str:
    """The first field of a record schema that cannot be null."""
    for field in json.loads(schema_text)["fields"]:
        kind = field["type"]
        if not (isinstance(kind, list) and "null" in kind):
            return str(field["name"])
    raise ValueError("the reader schema has no required field to detect undecodable records by")


def encode(record: Column, schema: str, schema_id: int) -> Column:
    """``record`` as a wire-format value under ``schema_id``."""
    header = bytearray(struct.pack(">bI", 0, schema_id))
    return F.concat(F.lit(header), to_avro(record, schema))


def compact(schema_text: str) -> str:
    return json.dumps(json.loads(schema_text), separators=(",", ":"))
