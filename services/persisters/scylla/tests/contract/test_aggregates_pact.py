"""The Scylla persister's side of its contract with the aggregator on ``temperatures.aggregated``.

It writes the Pact V4 asynchronous-message pact ``contracts-tests/pacts/scylla-persister-aggregator.json``
from ``fluxgate_scylla_persister.consumed`` (``fluxgate_testing.sink.pact`` builds it); the aggregator
verifies the committed copy against what its real Spark job writes
(``services/aggregator/tests/contract/test_persister_pacts.py``). What is the persister's own
here is the consumer half: how it uses the message.

Regenerate after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib \
        services/persisters/scylla/tests/contract
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from fluxgate_testing.sink.pact import persister_pact, routed

from fluxgate_scylla_persister.consumed import CONSUMED_FIELDS, CQL_TYPES
from fluxgate_scylla_persister.settings import DEFAULT_KCQL
from fluxgate_scylla_persister.table import RowBinder, autocreate_layout, table_name
from fluxgate_sink.contract import schema_mismatches

PACT = persister_pact(
    "scylla-persister",
    CONSUMED_FIELDS,
    "The fields of TemperatureAggregate the Scylla persister keys rows by and stores.",
    "fluxgate_scylla_persister.consumed",
)


def persister_writes(record: dict[str, Any]) -> None:
    """The consumer half: the pact's message routes through the default KCQL into the values
    of the default table's INSERT, keyed by device, metric, day and window start."""
    (item,) = routed(DEFAULT_KCQL, record)
    layout = autocreate_layout(item.statement, table_name(item.statement.target, "fluxgate"))
    binder = RowBinder(layout.name, list(layout.columns), item.statement)
    row = dict(zip(layout.columns, binder.values(item), strict=True))
    key = {column: row[column] for column in (*layout.partition_key, *layout.clustering)}
    assert key == {
        "device_id": "Sensor4",
        "metric": "temperature",
        "day": date(2017, 2, 13),
        "window_start": datetime(2017, 2, 13, 14, 46, tzinfo=UTC),
    }
    assert set(row) == {*CONSUMED_FIELDS, "day"}


def test_every_consumed_field_has_its_type_in_the_aggregate_schema() -> None:
    wrong = schema_mismatches(CONSUMED_FIELDS)
    assert not wrong, f"consumed fields that schemas/temperature_aggregate.avsc does not declare so: {wrong}"


def test_every_consumed_field_is_a_typed_column() -> None:
    assert set(CONSUMED_FIELDS) == set(CQL_TYPES)


def test_the_persister_can_use_the_message_it_asks_for() -> None:
    PACT.verify(persister_writes)


def test_the_pact_the_aggregator_verifies_is_the_one_written_here(tmp_path: Path) -> None:
    PACT.check_committed(tmp_path)
