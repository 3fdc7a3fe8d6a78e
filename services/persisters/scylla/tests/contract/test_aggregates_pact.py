"""The Scylla persister's side of its pact with the aggregator on ``temperatures.aggregated``:
``contracts-tests/pacts/scylla-persister-aggregator.json``, written from ``fluxgate_scylla_persister.consumed``.
What a persister's pact is, how it is checked and regenerated: ``fluxgate_testing.sink.pact``."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from fluxgate_testing.sink.pact import PersisterPactTests, persister_pact, routed

from fluxgate_scylla_persister.consumed import CONSUMED_FIELDS, CQL_TYPES
from fluxgate_scylla_persister.settings import DEFAULT_KCQL
from fluxgate_scylla_persister.table import RowBinder, autocreate_layout, table_name


class TestAggregatesPact(PersisterPactTests):
    pact = persister_pact(
        "scylla-persister",
        CONSUMED_FIELDS,
        "The fields of TemperatureAggregate the Scylla persister keys rows by and stores.",
        "fluxgate_scylla_persister.consumed",
    )

    def use(self, record: dict[str, Any]) -> None:
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


def test_every_consumed_field_is_a_typed_column() -> None:
    assert set(CONSUMED_FIELDS) == set(CQL_TYPES)
