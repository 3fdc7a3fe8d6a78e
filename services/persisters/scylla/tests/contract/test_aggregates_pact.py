"""The Scylla persister's side of its contract with the aggregator on ``temperatures.aggregated``.

It writes the Pact V4 asynchronous-message pact ``contracts-tests/pacts/scylla-persister-aggregator.json``
from ``fluxgate_scylla_persister.consumed``; the aggregator verifies the committed copy against
what its real Spark encoding writes (``services/aggregator/tests/contract/test_scylla_pact.py``).

Regenerate after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib \
        services/persisters/scylla/tests/contract
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
from pact import Pact, match

from fluxgate_core.kafka import ConsumedRecord
from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_scylla_persister.consumed import CONSUMED_FIELDS, CQL_TYPES, is_nullable, kind
from fluxgate_scylla_persister.settings import DEFAULT_KCQL
from fluxgate_scylla_persister.table import RowBinder, autocreate_layout, table_name
from fluxgate_sink.kcql import parse
from fluxgate_sink.sink import SinkItem

CONSUMER = "scylla-persister"
PROVIDER = "aggregator"
MESSAGE = "a temperature aggregate on temperatures.aggregated"
PACTS_DIR = Path(__file__).resolve().parents[5] / "contracts-tests" / "pacts"
PACT_FILE = f"{CONSUMER}-{PROVIDER}.json"
UPDATE_VARIABLE = "FLUXGATE_UPDATE_PACTS"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

EXAMPLE: dict[str, Any] = {
    "device_id": "Sensor4",
    "metric": "temperature",
    "window_start": 1486997160000,
    "window_end": 1486997220000,
    "count": 12,
    "min": 21.5,
    "max": 23.6,
    "mean": 22.4,
    "stddev": 0.61,
    "first_event_time": 1486997161029,
    "last_event_time": 1486997219029,
    "unit": "Cel",
}
# Avro resolution promotes int/long/float writers to double: any JSON number will do for a
# double; timestamps and counts must stay whole numbers.
MATCHERS: dict[str, Callable[[Any], Any]] = {
    "string": match.type,
    "double": match.number,
    "long": match.int,
    "timestamp-millis": match.int,
}
NULL_OR_SAME_TYPE = {"combine": "OR", "matchers": [{"match": "type"}, {"match": "null"}]}


def build_pact() -> Pact:
    """The persister's expectations of the aggregator's records, from the consumed declaration."""
    pact = Pact(CONSUMER, PROVIDER).with_specification("V4")
    body = {
        name: EXAMPLE[name] if is_nullable(avro_type) else MATCHERS[kind(avro_type)](EXAMPLE[name])
        for name, avro_type in CONSUMED_FIELDS.items()
    }
    nullable = {f"$.{name}": NULL_OR_SAME_TYPE for name, avro_type in CONSUMED_FIELDS.items() if is_nullable(avro_type)}
    (
        pact.upon_receiving(MESSAGE, "Async")
        .with_body(body, "application/json")
        .with_matching_rules({"body": nullable})
        .add_text_comment("The fields of TemperatureAggregate the Scylla persister keys rows by and stores.")
        .add_text_comment(
            "See fluxgate_scylla_persister.consumed. Contents: the decoded record, timestamps as epoch ms."
        )
    )
    return pact


def comparable(pact_file: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(pact_file.read_text(encoding="utf-8"))
    document["metadata"].pop("pactRust", None)
    return document


def persister_writes(body: str | bytes | None, metadata: dict[str, object]) -> None:
    """The consumer half: the pact's message routes through the default KCQL into the values
    of the default table's INSERT, keyed by device, metric, day and window start."""
    assert body is not None, "the message has no contents"
    message = json.loads(body)
    record = {
        name: EPOCH + timedelta(milliseconds=value) if kind(CONSUMED_FIELDS[name]) == "timestamp-millis" else value
        for name, value in message.items()
    }
    view = fastavro.parse_schema(
        {"type": "record", "name": "Consumed", "fields": [{"name": n, "type": t} for n, t in CONSUMED_FIELDS.items()]}
    )
    fastavro.validation.validate(record, view, raise_errors=True)
    (statement,) = parse(DEFAULT_KCQL)
    layout = autocreate_layout(statement, table_name(statement.target, "fluxgate"))
    source = ConsumedRecord("temperatures.aggregated", 0, 0, b"Sensor4", b"", {}, 0, record)
    event_time = statement.event_time(record)
    item = SinkItem(
        source,
        statement,
        statement.target_for(event_time),
        statement.document_id(record),
        statement.project(record),
        event_time,
    )
    row = dict(zip(layout.columns, RowBinder(layout.name, list(layout.columns), statement).values(item), strict=True))
    key = {column: row[column] for column in (*layout.partition_key, *layout.clustering)}
    assert key == {
        "device_id": "Sensor4",
        "metric": "temperature",
        "day": date(2017, 2, 13),
        "window_start": datetime(2017, 2, 13, 14, 46, tzinfo=UTC),
    }
    assert set(row) == {*CONSUMED_FIELDS, "day"}


def test_every_consumed_field_has_its_type_in_the_aggregate_schema() -> None:
    schema_types = {field["name"]: field["type"] for field in schema_dict(TEMPERATURE_AGGREGATE)["fields"]}
    wrong = {n: schema_types.get(n, "<absent>") for n, t in CONSUMED_FIELDS.items() if schema_types.get(n) != t}
    assert not wrong, f"consumed fields that schemas/temperature_aggregate.avsc does not declare so: {wrong}"


def test_every_consumed_field_is_a_typed_column() -> None:
    assert set(CONSUMED_FIELDS) == set(CQL_TYPES)


def test_the_persister_can_use_the_message_it_asks_for() -> None:
    build_pact().verify(persister_writes, "Async")


def test_the_pact_the_aggregator_verifies_is_the_one_written_here(tmp_path: Path) -> None:
    if os.environ.get(UPDATE_VARIABLE) == "1":
        build_pact().write_file(PACTS_DIR, overwrite=True)
    build_pact().write_file(tmp_path, overwrite=True)
    committed = PACTS_DIR / PACT_FILE
    assert committed.is_file() and comparable(committed) == comparable(tmp_path / PACT_FILE), (
        f"contracts-tests/pacts/{PACT_FILE} no longer matches what fluxgate_scylla_persister.consumed declares; "
        f"regenerate with {UPDATE_VARIABLE}=1 and commit it"
    )
