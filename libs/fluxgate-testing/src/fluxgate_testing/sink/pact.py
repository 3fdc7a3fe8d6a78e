"""The consumer side of a persister's pact with the aggregator on ``temperatures.aggregated``.

A persister's contract test subclasses :class:`PersisterPactTests`, which runs the checks
every persister's pact shares, with its pact (:func:`persister_pact`: its consumer name and
the fields its ``consumed.py`` declares) and keeps only what is its own: the consumer half,
``use``, taking the record as the sink runtime hands it over (decoded, timestamps as aware
datetimes) and showing the persister can use it. ``fluxgate_testing.pact`` builds the
Pact V4 message pact and keeps the committed copy in ``contracts-tests/pacts/``
honest. The aggregator verifies those copies against what its real Spark job writes
(``services/aggregator/tests/contract/test_persister_pacts.py``).

Regenerate the committed pacts after changing a declaration with ``FLUXGATE_UPDATE_PACTS=1``.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, ClassVar

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.contract import ConsumedFields
from fluxgate_sink.contract import schema_mismatches
from fluxgate_sink.kcql import parse
from fluxgate_sink.kcql_routing import Router
from fluxgate_sink.sink import SinkItem
from fluxgate_testing.pact import MessagePact

PROVIDER = "aggregator"
TOPIC = "temperatures.aggregated"
MESSAGE = f"a temperature aggregate on {TOPIC}"

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
"""The pact's example message: ``Sensor4``'s window starting 2017-02-13 14:46 UTC."""


def persister_pact(consumer: str, fields: ConsumedFields, purpose: str, declared_in: str) -> MessagePact:
    """A persister's pact with the aggregator: ``<consumer>-aggregator.json``, from ``fields``."""
    return MessagePact(consumer, PROVIDER, MESSAGE, fields, EXAMPLE, purpose, declared_in)


def routed(kcql: str, record: dict[str, Any], topic: str = TOPIC) -> list[SinkItem]:
    """The items the runtime's router makes of ``record`` read from ``topic`` under ``kcql`` (one
    per statement); fails when a statement cannot route it (a PK or event-time field missing ...)."""
    source = ConsumedRecord(topic, 0, 0, str(record.get("device_id", "")).encode(), b"", (), 0, record)
    result = Router(parse(kcql)).route([source])
    assert not result.unroutable, f"unroutable: {[str(u.error) for u in result.unroutable]}"
    return result.items


class PersisterPactTests(abc.ABC):
    """The tests every persister's pact runs. Subclass it as ``Test...`` in the persister's
    ``tests/contract`` with its ``pact`` (:func:`persister_pact`) and its consumer half, :meth:`use`."""

    pact: ClassVar[MessagePact]

    @abc.abstractmethod
    def use(self, record: dict[str, Any]) -> None:
        """The consumer half: show the persister can use ``record``, the pact's example decoded."""

    def test_every_consumed_field_has_its_type_in_the_aggregate_schema(self) -> None:
        wrong = schema_mismatches(self.pact.fields)
        assert not wrong, f"consumed fields that schemas/temperature_aggregate.avsc does not declare so: {wrong}"

    def test_the_persister_can_use_the_message_it_asks_for(self) -> None:
        self.pact.verify(self.use)

    def test_the_pact_the_aggregator_verifies_is_the_one_written_here(self, tmp_path: Path) -> None:
        self.pact.check_committed(tmp_path)
