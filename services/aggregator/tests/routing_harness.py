"""The job's real ``foreachBatch`` function (``micro_batch.router``) driven batch by batch on
static DataFrames: the records are framed as the query hands them (``wire.framed``) and decoded by it, its
ledger lives in a temporary folder, and what it writes is collected and decoded back into
the reference model's terms. No Kafka; the registry is a fixed listing: SensorReading v1
(known from the start) and v2 (an added optional field, registered after the start, so the
batch that first meets it looks it up), which the readings of ``upgraded`` devices are
written with."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from routing_model import Broken, Identity, Outputs, Reading, Record, Stats

from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.ledger import Ledger
from fluxgate_aggregator.micro_batch import router
from fluxgate_aggregator.settings import AggregatorSettings, duration_ms
from fluxgate_aggregator.wire import compact, framed
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_dict, schema_text

READING_ID, AGGREGATE_ID, READING_V2_ID = 1, 2, 3
RAW = "key binary, value binary, topic string, partition int, offset long"
READING_SCHEMA = fastavro.parse_schema(schema_dict(SENSOR_READING))
READING_V2 = {
    **schema_dict(SENSOR_READING),
    "fields": [
        *schema_dict(SENSOR_READING)["fields"],
        {"name": "firmware", "type": ["null", "string"], "default": None},
    ],
}
AGGREGATE_SCHEMA = fastavro.parse_schema(schema_dict(TEMPERATURE_AGGREGATE))
CONTRACTS = Contracts(
    reader=compact(schema_text(SENSOR_READING)),
    writers={READING_ID: compact(schema_text(SENSOR_READING))},
    output=compact(schema_text(TEMPERATURE_AGGREGATE)),
    output_id=AGGREGATE_ID,
)


class Crash(RuntimeError):
    """The job died after the batch wrote its outputs and ledger rows, before Spark recorded
    the batch's commit: before the ledger's commit, or between it and Spark's."""


def registry() -> dict[int, str]:
    """The input subject's versions as the registry lists them now."""
    return {READING_ID: compact(schema_text(SENSOR_READING)), READING_V2_ID: compact(json.dumps(READING_V2))}


def wire(record: Record, upgraded: frozenset[str] = frozenset()) -> bytes:
    if isinstance(record, Broken):
        return record.value
    v2 = record.device_id in upgraded
    body = io.BytesIO()
    fastavro.schemaless_writer(
        body,
        fastavro.parse_schema(READING_V2) if v2 else READING_SCHEMA,
        {
            "device_id": record.device_id,
            "metric": record.metric,
            "value": record.value,
            "unit": record.unit,
            "event_time": record.event_ms,
            "ingest_time": record.received_ms,
            "source_protocol": "MQTT",
            "source": f"devices/{record.device_id}/{record.metric}",
            "sequence": record.sequence,
            "attributes": {},
            **({"firmware": "2.1"} if v2 else {}),
        },
    )
    return b"\x00" + (READING_V2_ID if v2 else READING_ID).to_bytes(4, "big") + body.getvalue()


def _unwire(value: bytes, schema: Any) -> dict[str, Any]:
    assert value[0] == 0, value
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema)
    assert isinstance(record, dict)
    return record


def _ms(value: Any) -> int:
    return int(value.timestamp() * 1000) if hasattr(value, "timestamp") else int(value)


class SparkRouter:
    """One job: its ledger and state persist across :meth:`batch` calls, as in a run."""

    def __init__(
        self,
        spark: SparkSession,
        settings: AggregatorSettings,
        folder: Path,
        upgraded: frozenset[str] = frozenset(),
        evict_every: int | None = None,  # the ledger's, when not its default
    ) -> None:
        self.spark, self.settings, self.upgraded = spark, settings, upgraded
        self.ledger = Ledger(spark, str(folder / "ledger"), duration_ms(settings.window.watermark))
        if evict_every is not None:
            self.ledger.evict_every, self.ledger.evict_at_least = evict_every, 1
        self.state = JobState()
        self.written: list[Any] = []
        self.crash_next_commit: str | None = None  # "before" or "after" the ledger's commit
        self.offset = 0
        self._commit = self.ledger.commit
        self.ledger.commit = self._crashing_commit  # type: ignore[method-assign]
        contracts = dataclasses.replace(CONTRACTS, listing=registry)
        self.route = router(settings, contracts, self.state, self.ledger, self._write)

    def _write(self, rows: DataFrame) -> None:
        self.written = rows.collect()

    def _crashing_commit(self, marks: DataFrame, horizon_ms: int) -> None:
        when, self.crash_next_commit = self.crash_next_commit, None
        if when == "before":
            raise Crash("the job died before the ledger committed the batch")
        self._commit(marks, horizon_ms)
        if when == "after":
            raise Crash("the job died after the ledger committed the batch, before Spark did")

    def batch(self, batch_id: int, records: Sequence[Record]) -> Outputs:
        self.written = []
        self.route(framed(self._frame(records)), batch_id)
        return self._outputs()

    def _frame(self, records: Sequence[Record]) -> DataFrame:
        """The records as the Kafka source hands them (``RAW``), made from Arrow in the JVM:
        made from a list, each batch ran PySpark's Python workers: 0.3 CPU-s a batch beside the JVM's 3.6."""
        count = len(records)
        table = pa.table(
            {
                "key": pa.array([b"k"] * count, pa.binary()),
                "value": pa.array([wire(r, self.upgraded) for r in records], pa.binary()),
                "topic": pa.array([self.settings.input_topic] * count, pa.string()),
                "partition": pa.array([0] * count, pa.int32()),
                "offset": pa.array(range(self.offset, self.offset + count), pa.int64()),
            }
        )
        self.offset += count
        return self.spark.createDataFrame(table)

    def restart(self) -> None:
        """What a restart does to the ledger before the query resumes from its checkpoint."""
        self.ledger.reset()

    def _outputs(self) -> Outputs:
        out = Outputs(watermark_ms=self.ledger.watermark_ms)
        for row in self.written:
            if row["topic"] == self.settings.deadletter_topic:
                out.dead.append(bytes(row["value"]))
            elif row["topic"] == self.settings.late_topic:
                out.late.append(_identity(_unwire(bytes(row["value"]), READING_SCHEMA)))
            else:
                assert row["topic"] == self.settings.output_topic, row["topic"]
                aggregate = _unwire(bytes(row["value"]), AGGREGATE_SCHEMA)
                key = (aggregate["device_id"], _ms(aggregate["window_start"]), _ms(aggregate["window_end"]))
                assert key not in out.aggregates, f"{key} written twice in one batch"
                out.aggregates[key] = Stats(
                    aggregate["count"],
                    aggregate["min"],
                    aggregate["max"],
                    aggregate["mean"],
                    aggregate["stddev"],
                    _ms(aggregate["first_event_time"]),
                    _ms(aggregate["last_event_time"]),
                    aggregate["unit"],
                )
        return out


def _identity(reading: dict[str, Any]) -> Identity:
    return (reading["device_id"], _ms(reading["event_time"]), reading["value"], reading["sequence"])


def same(model: Outputs, job: Outputs) -> list[str]:
    """How the job's outputs of a batch differ from the model's (empty: they agree)."""
    problems = []
    if model.watermark_ms != job.watermark_ms:
        problems.append(f"watermark: model {model.watermark_ms}, job {job.watermark_ms}")
    if sorted(model.dead) != sorted(job.dead):
        problems.append(f"dead letters: model {sorted(model.dead)}, job {sorted(job.dead)}")
    if sorted(model.late, key=repr) != sorted(job.late, key=repr):
        problems.append(f"late: model {sorted(model.late, key=repr)}, job {sorted(job.late, key=repr)}")
    for key in sorted(model.aggregates.keys() | job.aggregates.keys()):
        ours, theirs = model.aggregates.get(key), job.aggregates.get(key)
        if ours is None or theirs is None or not ours.close_to(theirs):
            problems.append(f"window {key}: model {ours}, job {theirs}")
    return problems


def as_readings(records: Sequence[Record]) -> list[Reading]:
    return [r for r in records if isinstance(r, Reading)]
