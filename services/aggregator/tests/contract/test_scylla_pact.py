"""The aggregator verifies the Scylla persister's pact for ``temperatures.aggregated``
against bytes its real Spark path writes: wire-format readings decoded by ``wire.decode``,
windowed and encoded by ``job.aggregate`` (``to_avro`` under the output schema), then
decoded from the Confluent wire format with the **writer's** schema by the real
``AvroDecoder`` and handed, as JSON, to the Pact verifier.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from pact import Verifier
from pact.types import Message
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from fluxgate_aggregator import job
from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.settings import AggregatorSettings, SparkSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_aggregator.testing import reading
from fluxgate_aggregator.wire import SCHEMA_ID, compact, decode, frame_columns
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder

pytestmark = pytest.mark.spark

PACT_FILE = Path(__file__).resolve().parents[4] / "contracts-tests" / "pacts" / "scylla-persister-aggregator.json"
PROVIDER, CONSUMER = "aggregator", "scylla-persister"
READING_ID, AGGREGATE_ID = 1, 2
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BASE_MS = 1_700_000_040_000  # a whole minute
Record = Callable[[Column], Column]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = build_session(SparkSettings(master="local[1]", shuffle_partitions=1))  # type: ignore[call-arg]
    yield session
    session.stop()


class OneSchemaRegistry:
    def __init__(self, schema: dict[str, Any], schema_id: int) -> None:
        self._schema, self._id = Schema(json.dumps(schema), "AVRO"), schema_id

    def get_schema(self, schema_id: int) -> Schema:
        assert schema_id == self._id, f"schema id {schema_id} was never registered"
        return self._schema


def aggregated(spark: SparkSession, output_schema: dict[str, Any]) -> list[bytes]:
    """The job's aggregation of a few readings as value bytes (a batch DataFrame: same
    expressions as the stream, no Kafka needed)."""
    encoder = AvroEncoder(schema_dict(SENSOR_READING), READING_ID)
    readings = [
        reading("Sensor4", BASE_MS + 1_029, 21.5),
        reading("Sensor4", BASE_MS + 31_029, 23.5),
        {**reading("d2", BASE_MS + 5_000, 19.0), "unit": None},
    ]
    rows = [(r["device_id"].encode(), encoder.encode(r), "sensors.readings", 0, n) for n, r in enumerate(readings)]
    raw = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long")
    framed = raw.select("*", *[column.alias(name) for name, column in frame_columns(F.col("value")).items()])
    reader = compact(schema_text(SENSOR_READING))
    decoded = framed.withColumn("reading", decode(F.col("body"), F.col(SCHEMA_ID), {READING_ID: reader}, reader))
    contracts = Contracts(reader, {READING_ID: reader}, json.dumps(output_schema), AGGREGATE_ID)
    settings = AggregatorSettings()  # type: ignore[call-arg]
    return [bytes(row.value) for row in job.aggregate(decoded, settings, contracts).collect()]


def as_json(record: dict[str, Any]) -> bytes:
    """fastavro reads timestamp-millis as datetimes; the contract states epoch milliseconds."""
    plain = {k: (v - EPOCH) // timedelta(milliseconds=1) if isinstance(v, datetime) else v for k, v in record.items()}
    return json.dumps(plain).encode()


def messages(spark: SparkSession, output_schema: dict[str, Any]) -> list[bytes]:
    values = aggregated(spark, output_schema)
    assert values, "the aggregation produced nothing"
    decoder = AvroDecoder(OneSchemaRegistry(output_schema, AGGREGATE_ID))  # type: ignore[arg-type]
    return [as_json(decoder.decode(value)) for value in values]


def verify(message: bytes) -> None:
    def handler(name: str) -> Message:
        return Message(contents=message, content_type="application/json", metadata=None)

    verifier = Verifier(PROVIDER).message_handler(handler).add_source(PACT_FILE).set_coloured_output(enabled=False)
    try:
        verifier.verify()
    except RuntimeError:
        lines = [f"{PROVIDER} breaks the {CONSUMER}'s contract ({PACT_FILE.name}):"]
        for error in verifier.results.get("errors", []):
            mismatch = error.get("mismatch", {})
            for found in mismatch.get("mismatches") or [mismatch]:
                lines.append(f"  {found.get('path') or found.get('key', '?')} -> {found.get('mismatch', found)}")
        raise AssertionError("\n".join([*lines, "", verifier.output(strip_ansi=True)])) from None


def test_the_aggregates_spark_writes_satisfy_the_scylla_persister_pact(spark: SparkSession) -> None:
    found = messages(spark, schema_dict(TEMPERATURE_AGGREGATE))
    assert len(found) == 2
    assert any(b'"unit": null' in message for message in found)  # the nullable branch is exercised too
    for message in found:
        verify(message)


def reshaped(monkeypatch: pytest.MonkeyPatch, rename: dict[str, str], drop: set[str]) -> None:
    """The job's encoding after a producer refactoring: the record struct renamed/dropped to
    match its changed schema, then the real ``to_avro`` encoding."""
    real_encode = job.encode

    def encode(record: Column, schema: str, schema_id: int) -> Column:
        fields = [f["name"] for f in schema_dict(TEMPERATURE_AGGREGATE)["fields"] if f["name"] not in drop]
        struct = F.struct(*[record[name].alias(rename.get(name, name)) for name in fields])
        return real_encode(struct, schema, schema_id)

    monkeypatch.setattr(job, "encode", encode)


def changed_schema(rename: dict[str, str], drop: set[str]) -> dict[str, Any]:
    schema = copy.deepcopy(schema_dict(TEMPERATURE_AGGREGATE))
    schema["fields"] = [
        {**field, "name": rename.get(field["name"], field["name"])}
        for field in schema["fields"]
        if field["name"] not in drop
    ]
    return schema


def test_renaming_a_consumed_field_fails_naming_consumer_and_field(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    rename = {"device_id": "deviceId"}
    reshaped(monkeypatch, rename, set())
    message, *_ = messages(spark, changed_schema(rename, set()))
    assert b'"deviceId"' in message
    with pytest.raises(
        AssertionError, match=r"aggregator breaks the scylla-persister's .*\n.*missing .*keys: device_id"
    ):
        verify(message)


def test_dropping_a_consumed_field_fails_naming_consumer_and_field(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    reshaped(monkeypatch, {}, {"unit"})
    message, *_ = messages(spark, changed_schema({}, {"unit"}))
    assert b'"unit"' not in message
    with pytest.raises(AssertionError, match=r"aggregator breaks the scylla-persister's .*\n.*missing .*keys: unit"):
        verify(message)
