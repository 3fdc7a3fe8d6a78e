"""The aggregator's side of its contract with the producers of ``sensors.readings``.

It writes one Pact V4 asynchronous-message pact per producer (mqtt-proxy, coap-ingest)
from ``fluxgate_aggregator.consumed``: the fields the job reads, each with a matcher
for its type rather than a literal value (``fluxgate_testing.pact`` builds them). The
producers verify the committed copies in ``contracts-tests/pacts/`` against the messages
their real converters encode; the last test here fails when those copies no longer say
what the declaration makes.

Regenerate them after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib services/aggregator/tests/contract
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fluxgate_testing.pact import MessagePact, readings_pact

from fluxgate_aggregator.consumed import CONSUMED_FIELDS
from fluxgate_core.contract import schema_mismatches
from fluxgate_core.schemas import SENSOR_READING

PROVIDERS = ("mqtt-proxy", "coap-ingest")


def pact(provider: str) -> MessagePact:
    return readings_pact(
        "aggregator",
        provider,
        CONSUMED_FIELDS,
        "The fields of SensorReading the aggregator reads.",
        "fluxgate_aggregator.consumed",
    )


def aggregator_reads(reading: dict[str, Any]) -> None:
    """The consumer half: the decoded example (checked against the declared fields) is one
    the job can window: a finite value at a moment in time, for a device and a metric."""
    assert reading["device_id"] and reading["metric"]
    assert reading["value"] == reading["value"], "the value is NaN"
    assert reading["event_time"].tzinfo is not None


def test_every_consumed_field_has_its_type_in_the_sensor_reading_schema() -> None:
    wrong = schema_mismatches(CONSUMED_FIELDS, SENSOR_READING)
    assert not wrong, f"consumed fields that schemas/sensor_reading.avsc does not declare as consumed.py says: {wrong}"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_aggregator_can_use_the_message_it_asks_for(provider: str) -> None:
    pact(provider).verify(aggregator_reads)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_pacts_the_producers_verify_are_the_ones_written_here(provider: str, tmp_path: Path) -> None:
    pact(provider).check_committed(tmp_path)
