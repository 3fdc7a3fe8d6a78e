"""The aggregator's side of its contract with the producers of ``sensors.readings``.

It writes one Pact V4 asynchronous-message pact per producer (mqtt-proxy, coap-ingest)
from ``fluxgate_aggregator.consumed``: the fields the job reads, each with a matcher
for its type rather than a literal value. The producers verify the committed copies in
``contracts-tests/pacts/`` against the messages their real converters encode; the last
test here fails when those copies no longer say what this module generates.

Regenerate them after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib services/aggregator/tests/contract
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pact import Pact, match

from fluxgate_aggregator.consumed import CONSUMED_FIELDS, AvroType, is_nullable
from fluxgate_core.schemas import SENSOR_READING, schema_dict

CONSUMER = "aggregator"
PROVIDERS = ("mqtt-proxy", "coap-ingest")
MESSAGE = "a sensor reading on sensors.readings"
PACTS_DIR = Path(__file__).resolve().parents[4] / "contracts-tests" / "pacts"
UPDATE_VARIABLE = "FLUXGATE_UPDATE_PACTS"

EXAMPLE: dict[str, Any] = {
    "device_id": "Sensor4",
    "metric": "temperature",
    "value": 23.6,
    "unit": "Cel",
    "event_time": 1486997194029,
    "sequence": 42,
}
# The job compares ``metric`` with the configured name as is, so it relies on the
# gateways' normalisation (lower case, aliases resolved), not merely on a string.
PATTERNS = {"metric": r"^[a-z][a-z0-9_.\-]{0,63}$"}
# Avro resolution promotes int, long and float writers to the job's double, so any
# JSON number will do for a double; timestamps must stay whole milliseconds.
MATCHERS: dict[str, Callable[[Any], Any]] = {
    "string": match.type,
    "double": match.number,
    "timestamp-millis": match.int,
    "long": match.int,
}
NULL_OR_SAME_TYPE = {"combine": "OR", "matchers": [{"match": "type"}, {"match": "null"}]}


def kind(avro_type: AvroType) -> str:
    """The name a matcher is chosen by: the logical type, else the (non-null) type."""
    if isinstance(avro_type, dict):
        return avro_type.get("logicalType", avro_type["type"])
    if isinstance(avro_type, list):
        (branch,) = [branch for branch in avro_type if branch != "null"]
        return branch
    return avro_type


def body_matcher(name: str, avro_type: AvroType) -> Any:
    example = EXAMPLE[name]
    if is_nullable(avro_type):
        return example  # its rule (type or null) goes in with_matching_rules: the DSL cannot say OR
    if name in PATTERNS:
        return match.regex(example, regex=PATTERNS[name])
    return MATCHERS[kind(avro_type)](example)


def build_pact(provider: str) -> Pact:
    """The aggregator's expectations of ``provider``'s readings, from the consumed declaration."""
    pact = Pact(CONSUMER, provider).with_specification("V4")
    body = {name: body_matcher(name, avro_type) for name, avro_type in CONSUMED_FIELDS.items()}
    nullable = {f"$.{name}": NULL_OR_SAME_TYPE for name, avro_type in CONSUMED_FIELDS.items() if is_nullable(avro_type)}
    (
        pact.upon_receiving(MESSAGE, "Async")
        .with_body(body, "application/json")
        .with_matching_rules({"body": nullable})
        .add_text_comment("The fields of SensorReading the aggregator reads: see fluxgate_aggregator.consumed.")
        .add_text_comment("Contents are the record decoded from the Avro body, timestamp-millis as epoch ms.")
    )
    return pact


def write_pacts(directory: Path) -> list[Path]:
    for provider in PROVIDERS:
        build_pact(provider).write_file(directory, overwrite=True)
    return [directory / f"{CONSUMER}-{provider}.json" for provider in PROVIDERS]


def comparable(pact_file: Path) -> dict[str, Any]:
    """A pact without the pact-rust versions, which change with pact-python, not with the contract."""
    document: dict[str, Any] = json.loads(pact_file.read_text(encoding="utf-8"))
    document["metadata"].pop("pactRust", None)
    return document


def consumed_view_schema() -> Any:
    """An Avro record of only the consumed fields: what the job sees of a reading."""
    fields = [{"name": name, "type": avro_type} for name, avro_type in CONSUMED_FIELDS.items()]
    return fastavro.parse_schema({"type": "record", "name": "ConsumedReading", "fields": fields})


def aggregator_reads(body: str | bytes | None, metadata: dict[str, object]) -> None:
    """The consumer half of the contract: the pact's message is a reading the job can use."""
    assert body is not None, "the message has no contents"
    reading = json.loads(body)
    record = {**reading, "event_time": datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=reading["event_time"])}
    fastavro.validation.validate(record, consumed_view_schema(), raise_errors=True)


def test_every_consumed_field_has_its_type_in_the_sensor_reading_schema() -> None:
    schema_types = {field["name"]: field["type"] for field in schema_dict(SENSOR_READING)["fields"]}
    wrong = {
        name: schema_types.get(name, "<absent>") for name, t in CONSUMED_FIELDS.items() if schema_types.get(name) != t
    }
    assert not wrong, f"consumed fields that schemas/sensor_reading.avsc does not declare as consumed.py says: {wrong}"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_aggregator_can_use_the_message_it_asks_for(provider: str) -> None:
    build_pact(provider).verify(aggregator_reads, "Async")


def test_the_pacts_the_producers_verify_are_the_ones_written_here(tmp_path: Path) -> None:
    if os.environ.get(UPDATE_VARIABLE) == "1":
        write_pacts(PACTS_DIR)
    stale = [
        committed.name
        for generated in write_pacts(tmp_path)
        if not (committed := PACTS_DIR / generated.name).is_file() or comparable(committed) != comparable(generated)
    ]
    assert not stale, (
        f"contracts-tests/pacts/{', '.join(stale)} no longer match what fluxgate_aggregator.consumed declares; "
        f"regenerate with {UPDATE_VARIABLE}=1 and commit them"
    )
