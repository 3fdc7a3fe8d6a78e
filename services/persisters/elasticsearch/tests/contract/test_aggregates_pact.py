"""The Elasticsearch persister's side of its pact with the aggregator on ``temperatures.aggregated``:
``contracts-tests/pacts/es-persister-aggregator.json``, written from ``fluxgate_es_persister.consumed``.
What a persister's pact is, how it is checked and regenerated: ``fluxgate_testing.sink.pact``."""

from __future__ import annotations

from typing import Any

from fluxgate_testing.sink.pact import PersisterPactTests, persister_pact, routed

from fluxgate_es_persister.consumed import CONSUMED_FIELDS
from fluxgate_es_persister.mapping import TEMPERATURE_AGGREGATE_PROPERTIES
from fluxgate_es_persister.settings import DEFAULT_KCQL
from fluxgate_es_persister.sink import bulk_operations


class TestAggregatesPact(PersisterPactTests):
    pact = persister_pact(
        "es-persister",
        CONSUMED_FIELDS,
        "The fields of TemperatureAggregate the Elasticsearch persister reads and maps.",
        "fluxgate_es_persister.consumed",
    )

    def use(self, record: dict[str, Any]) -> None:
        """The consumer half: the pact's message routes through the default KCQL into a bulk action."""
        (item,) = routed(DEFAULT_KCQL, record)
        action, document = bulk_operations([item])
        assert action == {"index": {"_index": "temperatures-2017.02.13", "_id": "Sensor4|temperature|1486997160000"}}
        assert set(document) >= set(CONSUMED_FIELDS)


def test_every_consumed_field_has_an_explicit_mapping() -> None:
    assert set(CONSUMED_FIELDS) == set(TEMPERATURE_AGGREGATE_PROPERTIES)
