"""The aggregator verifies every persister's pact for ``temperatures.aggregated``
(``contracts-tests/pacts/*-persister-aggregator.json``) against bytes the running job
writes: wire-format readings framed as the job's query hands them (``wire.framed``) to its
``foreachBatch`` function (``micro_batch.router``, with a ledger in a temporary folder), which decodes,
windows and encodes them (``window_stats.window_stats`` and ``window_stats.encoded``; ``to_avro``
under the output schema) into what it hands the Kafka sink; those values are decoded from
the Confluent wire format with the **writer's** schema by the real ``AvroDecoder`` and
handed, as JSON, to the Pact verifier. The aggregation of the unchanged schema runs once
per module; each negative test runs its own reshaped one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aggregator_reference import reading
from confluent_kafka.schema_registry import Schema
from pact import Verifier
from pact.types import Message
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_class_archive import optimising_compiler

from fluxgate_aggregator import window_stats
from fluxgate_aggregator.contracts import Contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.ledger import Ledger
from fluxgate_aggregator.micro_batch import router
from fluxgate_aggregator.settings import AggregatorSettings, SparkSettings, duration_ms
from fluxgate_aggregator.spark import build_session
from fluxgate_aggregator.wire import compact, framed
from fluxgate_aggregator.wire import encode as wire_encode
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder

pytestmark = pytest.mark.spark

PACTS = Path(__file__).resolve().parents[4] / "contracts-tests" / "pacts"
PROVIDER = "aggregator"
READING_ID, AGGREGATE_ID = 1, 2
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BASE_MS = 1_700_000_040_000  # a whole minute
RAW = "key binary, value binary, topic string, partition int, offset long"

# Per consumer: a field the negative tests rename (old -> new name) and one they drop.
BREAKS: dict[str, tuple[dict[str, str], str]] = {
    "es-persister": ({"window_start": "windowStart"}, "stddev"),
    "scylla-persister": ({"device_id": "deviceId"}, "unit"),
    "hazelcast-persister": ({"metric": "metricName"}, "window_start"),
}
CONSUMERS = sorted(BREAKS)


def pact_file(consumer: str) -> Path:
    return PACTS / f"{consumer}-{PROVIDER}.json"


class OneSchemaRegistry:
    def __init__(self, schema: dict[str, Any], schema_id: int) -> None:
        self._schema, self._id = Schema(json.dumps(schema), "AVRO"), schema_id

    def get_schema(self, schema_id: int) -> Schema:
        assert schema_id == self._id, f"schema id {schema_id} was never registered"
        return self._schema


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # The first session of the Spark lane's process: its JVM is the one the integration tests'
    # session gets after it, so it keeps the optimising compiler as theirs does.
    with optimising_compiler():
        session = build_session(SparkSettings(master="local[1]", shuffle_partitions=1))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def aggregate_messages(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., list[bytes]]:
    """The job's aggregates of a few readings as JSON messages, per (rename, drop) of the
    output schema; each distinct one is computed once."""
    cache: dict[tuple[tuple[tuple[str, str], ...], str | None], list[bytes]] = {}

    def messages(rename: dict[str, str] | None = None, drop: str | None = None) -> list[bytes]:
        key = (tuple(sorted((rename or {}).items())), drop)
        if key not in cache:
            schema = changed_schema(rename or {}, drop)
            with reshaped(rename or {}, drop) if key != ((), None) else nullcontext():
                values = aggregated(spark, tmp_path_factory.mktemp("stream"), schema)
            assert values, "the aggregation produced nothing"
            decoder = AvroDecoder(OneSchemaRegistry(schema, AGGREGATE_ID))
            cache[key] = [as_json(decoder.decode(value)) for value in values]
        return cache[key]

    return messages


def raw_readings(spark: SparkSession, readings: list[dict[str, Any]], first_offset: int) -> DataFrame:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), READING_ID)
    rows = [
        (r["device_id"].encode(), encoder.encode(r), "sensors.readings", 0, first_offset + n)
        for n, r in enumerate(readings)
    ]
    return spark.createDataFrame(rows, RAW)


def aggregated(spark: SparkSession, workdir: Path, output_schema: dict[str, Any]) -> list[bytes]:
    """The values the job's routing writes to the output topic for one batch: three readings
    in one minute and a later one (its own window stays open) that moves the watermark past
    that minute, so the batch closes it."""
    readings = [
        reading("Sensor4", BASE_MS + 1_029, 21.5),
        reading("Sensor4", BASE_MS + 31_029, 23.5),
        {**reading("d2", BASE_MS + 5_000, 19.0), "unit": None},
        reading("closer", BASE_MS + 120_000, 20.0),
    ]
    reader = compact(schema_text(SENSOR_READING))
    contracts = Contracts(reader, {READING_ID: reader}, json.dumps(output_schema), AGGREGATE_ID)
    settings = AggregatorSettings()
    written: list[Any] = []
    ledger = Ledger(spark, str(workdir / "ledger"), duration_ms(settings.window.watermark))
    route = router(settings, contracts, JobState(), ledger, lambda rows: written.extend(rows.collect()))
    route(framed(raw_readings(spark, readings, 0)), 0)
    return [bytes(row.value) for row in written if row.topic == settings.output_topic]


def as_json(record: dict[str, Any]) -> bytes:
    """fastavro reads timestamp-millis as datetimes; the contract states epoch milliseconds."""
    plain = {k: (v - EPOCH) // timedelta(milliseconds=1) if isinstance(v, datetime) else v for k, v in record.items()}
    return json.dumps(plain).encode()


@contextmanager
def reshaped(rename: dict[str, str], drop: str | None) -> Iterator[None]:
    """The job's encoding after a producer refactoring: the record struct renamed/dropped to
    match its changed schema, then the real ``to_avro`` encoding."""

    def encode(record: Column, schema: str, schema_id: int) -> Column:
        fields = [f["name"] for f in schema_dict(TEMPERATURE_AGGREGATE)["fields"] if f["name"] != drop]
        struct = F.struct(*[record[name].alias(rename.get(name, name)) for name in fields])
        return wire_encode(struct, schema, schema_id)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(window_stats, "encode", encode)
        yield


def changed_schema(rename: dict[str, str], drop: str | None) -> dict[str, Any]:
    schema = copy.deepcopy(schema_dict(TEMPERATURE_AGGREGATE))
    schema["fields"] = [
        {**field, "name": rename.get(field["name"], field["name"])}
        for field in schema["fields"]
        if field["name"] != drop
    ]
    return schema


def verify(consumer: str, message: bytes) -> None:
    def handler(name: str) -> Message:
        return Message(contents=message, content_type="application/json", metadata=None)

    source = pact_file(consumer)
    verifier = Verifier(PROVIDER).message_handler(handler).add_source(source).set_coloured_output(enabled=False)
    try:
        verifier.verify()
    except RuntimeError:
        lines = [f"{PROVIDER} breaks the {consumer}'s contract ({source.name}):"]
        for error in verifier.results.get("errors", []):
            mismatch = error.get("mismatch", {})
            for found in mismatch.get("mismatches") or [mismatch]:
                lines.append(f"  {found.get('path') or found.get('key', '?')} -> {found.get('mismatch', found)}")
        raise AssertionError("\n".join([*lines, "", verifier.output(strip_ansi=True)])) from None


def test_every_persister_pact_is_verified_here() -> None:
    found = {path.name.removesuffix(f"-{PROVIDER}.json") for path in PACTS.glob(f"*-persister-{PROVIDER}.json")}
    assert found == set(BREAKS), "list each persister's pact in BREAKS, with a field to rename and one to drop"


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_the_aggregates_spark_writes_satisfy_the_persister_pact(
    consumer: str, aggregate_messages: Callable[..., list[bytes]]
) -> None:
    found = aggregate_messages()
    assert len(found) == 2
    assert any(b'"unit": null' in message for message in found)  # the nullable branch is exercised too
    for message in found:
        verify(consumer, message)


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_renaming_a_consumed_field_fails_naming_consumer_and_field(
    consumer: str, aggregate_messages: Callable[..., list[bytes]]
) -> None:
    rename, _ = BREAKS[consumer]
    ((old, new),) = rename.items()
    message, *_ = aggregate_messages(rename=rename)
    assert f'"{new}"'.encode() in message
    with pytest.raises(AssertionError, match=rf"aggregator breaks the {consumer}'s .*\n.*missing .*keys: {old}"):
        verify(consumer, message)


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_dropping_a_consumed_field_fails_naming_consumer_and_field(
    consumer: str, aggregate_messages: Callable[..., list[bytes]]
) -> None:
    _, drop = BREAKS[consumer]
    message, *_ = aggregate_messages(drop=drop)
    assert f'"{drop}"'.encode() not in message
    with pytest.raises(AssertionError, match=rf"aggregator breaks the {consumer}'s .*\n.*missing .*keys: {drop}"):
        verify(consumer, message)
