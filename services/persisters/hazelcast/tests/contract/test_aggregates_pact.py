"""The Hazelcast persister's side of its pact with the aggregator on ``temperatures.aggregated``:
``contracts-tests/pacts/hazelcast-persister-aggregator.json``, written from ``fluxgate_hazelcast_persister.consumed``.
What a persister's pact is, how it is checked and regenerated: ``fluxgate_testing.sink.pact``."""

from __future__ import annotations

from typing import Any

from fluxgate_testing.sink.pact import PersisterPactTests, persister_pact, routed
from hazelcast_store import read_json

from fluxgate_hazelcast_persister.consumed import CONSUMED_FIELDS
from fluxgate_hazelcast_persister.settings import DEFAULT_KCQL
from fluxgate_hazelcast_persister.structures import Structure, check_statements, structure_of
from fluxgate_hazelcast_persister.values import value_of
from fluxgate_sink.kcql import parse

# The default statement as an IMap: the same routing, the PK values joined as the entry's key.
AS_IMAP = DEFAULT_KCQL.replace("STOREAS RING_BUFFER", "STOREAS IMAP")


class TestAggregatesPact(PersisterPactTests):
    pact = persister_pact(
        "hazelcast-persister",
        CONSUMED_FIELDS,
        "The fields of TemperatureAggregate the Hazelcast persister keys entries by (the default PK and event time).",
        "fluxgate_hazelcast_persister.consumed",
    )

    def use(self, record: dict[str, Any]) -> None:
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


def test_the_imap_form_of_the_default_statement_is_valid() -> None:
    check_statements(parse(AS_IMAP))


def test_without_window_start_an_entry_is_keyed_by_kafka_coordinates_not_by_window() -> None:
    (entry,) = routed(AS_IMAP, {"device_id": "Sensor4", "metric": "temperature"})
    assert entry.id == "temperatures.aggregated/0/0"  # a replay from elsewhere would add a second entry
