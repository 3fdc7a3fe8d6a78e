"""device-status's side of its contract with the producers of ``sensors.readings``.

It writes one Pact V4 asynchronous-message pact per gateway (mqtt-proxy, coap-ingest) from
``fluxgate_device_status.consumed`` (``fluxgate_testing.pact`` builds them); the
gateways verify the committed copies against what their real converters encode
(``contracts-tests/test_sensor_readings_pacts.py``). What is this service's own here is the
consumer half: the example reading goes through the same code a real one does.

Regenerate after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib \
        services/device-status/tests/contract
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from fluxgate_testing.pact import READING_EXAMPLE, MessagePact, readings_pact

from fluxgate_core.contract import schema_mismatches
from fluxgate_core.schemas import DEVICE_STATUS, SENSOR_READING, schema_dict
from fluxgate_device_status.consumed import CONSUMED_FIELDS
from fluxgate_device_status.device_state import Reading, apply_reading, transition_record

PROVIDERS = ("mqtt-proxy", "coap-ingest")
NOW_MS = 1486997195000


def pact(provider: str) -> MessagePact:
    return readings_pact(
        "device-status",
        provider,
        CONSUMED_FIELDS,
        "The fields of SensorReading device-status keeps per device and judges silence by.",
        "fluxgate_device_status.consumed",
    )


def status_tracks(record: dict[str, Any]) -> None:
    """The consumer half: the reading becomes a table entry and a ``DeviceStatus`` transition
    that encodes under the registered schema, with the reading's values in both."""
    reading = Reading.from_record(record, partition=0, offset=0)
    state, turned = apply_reading(None, reading, NOW_MS)
    assert turned == "ONLINE"
    assert state["metrics"][record["metric"]]["value"] == record["value"]
    assert state["last_ingest_time_ms"] == int(record["ingest_time"].timestamp() * 1000)
    transition = transition_record(state, None, threshold_ms=60_000)
    fastavro.validation.validate(transition, fastavro.parse_schema(schema_dict(DEVICE_STATUS)), raise_errors=True)
    assert (transition["source_protocol"], transition["source"]) == (record["source_protocol"], record["source"])


def test_every_consumed_field_has_its_type_in_the_sensor_reading_schema() -> None:
    wrong = schema_mismatches(CONSUMED_FIELDS, SENSOR_READING)
    assert not wrong, f"consumed fields that schemas/sensor_reading.avsc does not declare as consumed.py says: {wrong}"


def test_the_declaration_is_what_the_service_reads() -> None:
    # Reading.from_record must fail on a record lacking any declared field, and need no other.
    example = pact("mqtt-proxy").decoded(json.dumps({name: READING_EXAMPLE[name] for name in CONSUMED_FIELDS}))
    Reading.from_record(example, 0, 0)
    for name in CONSUMED_FIELDS:
        if name == "unit":
            continue  # nullable: read with .get, so absent means null
        with pytest.raises(KeyError, match=name):
            Reading.from_record({k: v for k, v in example.items() if k != name}, 0, 0)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_device_status_can_use_the_message_it_asks_for(provider: str) -> None:
    pact(provider).verify(status_tracks)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_pacts_the_gateways_verify_are_the_ones_written_here(provider: str, tmp_path: Path) -> None:
    pact(provider).check_committed(tmp_path)
