"""Each device's own watermark (decision 0011): lateness is judged per device, so one device's
clock changes no other device's aggregates or lateness, whatever its error.

The job keeps a table with a row per device that has ever sent a reading of its metric:

* ``newest_ms``: ``E(d)``, the newest event time of its readings;
* ``offset_ms``: ``o(d)``, how far its clock is behind the gateways' (negative: ahead): the
  smallest ingest minus event time of its readings in the last batch that had any. The
  freshest reading says most of the clock; one delivered late, or stamped in the past, says
  nothing of it while a fresh one came with it. A rise is believed only as fast as the
  gateways' clock moved in that batch;
* ``floor_ms``: its watermark when it last sent, which it never moves back from.

With ``C`` the gateways' clock (the newest ``ingest_time`` of any reading: no device sets it),
a device's watermark is ``W(d) = max(floor, max(E(d), C - o(d)) - delay)``. Between a
device's readings only ``C`` moves, and ``W(d)`` moves with it, so the table changes only for
the devices of a batch, and a silent device's windows still close as the fleet's time goes
on. The reference model is ``tests/routing_model.py``'s ``DeviceClockModel``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fluxgate_aggregator.batch_values import with_values

DEVICES_SCHEMA = "device_id string, newest_ms long, offset_ms long, floor_ms long"
# The batch's values, as columns (batch_values: a literal would compile the plan anew per batch).
CLOCK, MOVED = "_clock_ms", "_clock_moved_ms"


def watermarks(devices: DataFrame, clock_ms: int | None, delay_ms: int) -> DataFrame:
    """``device_id``, ``mark_ms``: each device's watermark at the gateways' clock ``clock_ms``."""
    devices, clock = _clocked(devices, clock_ms)
    mark = _mark(F.col("floor_ms"), F.col("newest_ms"), F.col("offset_ms"), clock, delay_ms)
    return devices.select("device_id", mark.alias("mark_ms"))


def learned(devices: DataFrame, readings: DataFrame, clocks: tuple[int | None, int | None], delay_ms: int) -> DataFrame:
    """The table after a batch's ``readings`` (each with ``mark_ms``, its device's watermark
    at the batch's start, null for a device new in it, and ``ingest_time``), ``clocks``
    being the gateways' clock before and after the batch."""
    before, clock_ms = clocks
    moved = 0 if before is None or clock_ms is None else clock_ms - before
    event_ms, ingest_ms = F.unix_millis(F.col("event_time")), F.unix_millis(F.col("ingest_time"))
    batch = readings.groupBy(F.col("device_id").alias("device_id")).agg(
        F.max(event_ms).alias("batch_newest"),
        F.min(ingest_ms - event_ms).alias("batch_offset"),
        F.max("mark_ms").alias("batch_mark"),  # one value per device: its watermark before the batch
    )
    both = devices.join(batch, "device_id", "full_outer")
    both, clock = _clocked(both, clock_ms, **{MOVED: moved})
    newest = F.greatest(F.col("newest_ms"), F.col("batch_newest"))  # greatest skips nulls
    sent = F.col("batch_newest").isNotNull()
    # A rise is believed only as fast as the gateways' clock moved: a batch holding nothing
    # but readings stamped in the past holds its device back by at most the batch's time
    # (least skips the null of a new device).
    rise_bound = F.col("offset_ms") + (F.lit(0) if clock_ms is None else F.col(MOVED))
    offset = F.when(sent, F.least(F.col("batch_offset"), rise_bound)).otherwise(F.col("offset_ms"))
    # A device that sent sets its floor where its watermark is now; greatest(null, x) is x for
    # a new one. The others keep theirs: their watermark moves by C alone, never back.
    floor = F.when(sent, F.greatest(F.col("batch_mark"), _mark(F.lit(None), newest, offset, clock, delay_ms)))
    return both.select(
        "device_id",
        newest.alias("newest_ms"),
        offset.alias("offset_ms"),
        floor.otherwise(F.col("floor_ms")).alias("floor_ms"),
    )


def _clocked(rows: DataFrame, clock_ms: int | None, **more: int) -> tuple[DataFrame, Column | None]:
    """``rows`` with the gateways' clock (and ``more``) as batch values, and the clock's
    column; as they are, and None, while no reading has told the clock."""
    if clock_ms is None:
        return rows, None
    return with_values(rows, **{CLOCK: clock_ms, **more}), F.col(CLOCK)


def _mark(floor: Column, newest: Column, offset: Column, clock: Column | None, delay_ms: int) -> Column:
    own = newest if clock is None else F.greatest(newest, clock - offset)
    return F.greatest(floor, own - F.lit(delay_ms))
