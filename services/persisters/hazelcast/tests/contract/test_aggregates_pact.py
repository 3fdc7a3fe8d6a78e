"""The Hazelcast persister's side of its contract with the aggregator on ``temperatures.aggregated``.

It writes the Pact V4 asynchronous-message pact ``contracts-tests/pacts/hazelcast-persister-aggregator.json``
from ``fluxgate_hazelcast_persister.consumed`` (``fluxgate_testing.sink.pact`` builds it); the
aggregator verifies the committed copy against what its real Spark job writes
(``services/aggregator/tests/contract/test_persister_pacts.py``). What is the persister's own
here is the consumer half: how it uses the message.

Regenerate after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib \
        services/persisters/hazelcast/tests/contract
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fluxgate_testing.sink.pact import persister_pact, routed
from hazelcast_store import read_json

from fluxgate_hazelcast_persister.consumed import CONSUMED_FIELDS
from fluxgate_hazelcast_persister.settings import DEFAULT_KCQL
from fluxgate_hazelcast_persister.structures import Structure, check_statements, structure_of
from fluxgate_hazelcast_persister.values import value_of
from fluxgate_sink.contract import schema_mismatches
from fluxgate_sink.kcql import parse

PACT = persister_pact(
    "hazelcast-persister",
    CONSUMED_FIELDS,
    "The fields of TemperatureAggregate the Hazelcast persister keys entries by (the default PK and event time).",
    "fluxgate_hazelcast_persister.consumed",
)
# The default statement as an IMap: the same routing, the PK values joined as the entry's key.
AS_IMAP = DEFAULT_KCQL.replace("STOREAS RING_BUFFER", "STOREAS IMAP")


def persister_writes(record: dict[str, Any]) -> None:
    """The consumer half: the pact's message routes through the default KCQL into the JSON
    value of the ringbuffer, and through the same statement as an IMap into the entry's key."""
    (item,) = routed(DEFAULT_KCQL, record)
    assert structure_of(item.statement) is Structure.RING_BUFFER
    value = read_json(value_of(item))
    assert value["window_start"] == "2017-02-13T14:46:00+00:00"
    assert set(value) >= set(CONSUMED_FIELDS)
    (entry,) = routed(AS_IMAP, record)
    assert structure_of(entry.statement) is Structure.IMAP
    assert entry.id == "Sensor4|temperature|1486997160000"


def test_every_consumed_field_has_its_type_in_the_aggregate_schema() -> None:
    wrong = schema_mismatches(CONSUMED_FIELDS)
    assert not wrong, f"consumed fields that schemas/temperature_aggregate.avsc does not declare so: {wrong}"


def test_the_imap_form_of_the_default_statement_is_valid() -> None:
    check_statements(parse(AS_IMAP))


def test_the_persister_can_use_the_message_it_asks_for() -> None:
    PACT.verify(persister_writes)


def test_without_window_start_an_entry_is_keyed_by_kafka_coordinates_not_by_window() -> None:
    (entry,) = routed(AS_IMAP, {"device_id": "Sensor4", "metric": "temperature"})
    assert entry.id == "temperatures.aggregated/0/0"  # a replay from elsewhere would add a second entry


def test_the_pact_the_aggregator_verifies_is_the_one_written_here(tmp_path: Path) -> None:
    PACT.check_committed(tmp_path)
