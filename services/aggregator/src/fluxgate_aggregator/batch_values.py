"""Values that change from one micro-batch to the next (the gateways' clock), carried into
Spark's plans as data, never as literals.

Spark writes a long literal into the Java source it generates for a plan (``Literal.doGenCode``)
and reuses compiled code only for the same source. A plan holding the batch's clock was
therefore compiled afresh in every batch: by Janino, then by the JVM's JIT compilers once the
new classes ran hot. In the job that was 26 classes per batch, even with Spark's code cache
big enough (``bench/results/2026-11-27-aggregator-generated-code.md``). A one-row table of the
values, broadcast and cross-joined, keeps the source the same from batch to batch: the values
travel in the table's rows. Broadcasting it costs a small Spark job or two per use, less than
the compiling it saves.

A string literal is written as a reference, not into the source, so the ledger's entry ids
stay literals (as strings).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def with_values(frame: DataFrame, **values: int) -> DataFrame:
    """``frame`` with a column per value, the same in every row (an inline table: a local
    relation, its values in the plan's data, not in generated code)."""
    row = ", ".join(f"CAST({int(value)} AS BIGINT)" for value in values.values())
    names = ", ".join(values)  # the callers' own column names; the values are ints
    table = frame.sparkSession.sql(f"SELECT * FROM VALUES ({row}) AS batch_values({names})")  # noqa: S608
    return frame.crossJoin(F.broadcast(table))
