"""The Elasticsearch persister's side of its contract with the aggregator on ``temperatures.aggregated``.

It writes the Pact V4 asynchronous-message pact ``contracts-tests/pacts/es-persister-aggregator.json``
from ``fluxgate_es_persister.consumed`` (``fluxgate_testing.sink.pact`` builds it); the aggregator
verifies the committed copy against what its real Spark job writes
(``services/aggregator/tests/contract/test_persister_pacts.py``). What is the persister's own
here is the consumer half: how it uses the message.

Regenerate after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib \
        services/persisters/elasticsearch/tests/contract
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fluxgate_testing.sink.pact import persister_pact, routed

from fluxgate_es_persister.consumed import CONSUMED_FIELDS
from fluxgate_es_persister.mapping import TEMPERATURE_AGGREGATE_PROPERTIES
from fluxgate_es_persister.settings import DEFAULT_KCQL
from fluxgate_es_persister.sink import bulk_operations
from fluxgate_sink.contract import schema_mismatches

PACT = persister_pact(
    "es-persister",
    CONSUMED_FIELDS,
    "The fields of TemperatureAggregate the Elasticsearch persister reads and maps.",
    "fluxgate_es_persister.consumed",
)


def persister_writes(record: dict[str, Any]) -> None:
    """The consumer half: the pact's message routes through the default KCQL into a bulk action."""
    (item,) = routed(DEFAULT_KCQL, record)
    action, document = bulk_operations([item])
    assert action == {"index": {"_index": "temperatures-2017.02.13", "_id": "Sensor4|temperature|1486997160000"}}
    assert set(document) >= set(CONSUMED_FIELDS)


def test_every_consumed_field_has_its_type_in_the_aggregate_schema() -> None:
    wrong = schema_mismatches(CONSUMED_FIELDS)
    assert not wrong, f"consumed fields that schemas/temperature_aggregate.avsc does not declare so: {wrong}"


def test_every_consumed_field_has_an_explicit_mapping() -> None:
    assert set(CONSUMED_FIELDS) == set(TEMPERATURE_AGGREGATE_PROPERTIES)


def test_the_persister_can_use_the_message_it_asks_for() -> None:
    PACT.verify(persister_writes)


def test_the_pact_the_aggregator_verifies_is_the_one_written_here(tmp_path: Path) -> None:
    PACT.check_committed(tmp_path)
