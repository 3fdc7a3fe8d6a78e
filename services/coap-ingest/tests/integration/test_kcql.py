"""coap-ingest started from Stream-Reactor CoAP source KCQL, observing libcoap's real server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from coap_payloads import T0, reading_json

from fluxgate_core.consumed_record import ConsumedRecord

pytestmark = pytest.mark.integration


def test_kcql_and_source_uri_observe_the_resources_into_the_kcql_topic(
    topics: tuple[str, str],
    read_readings: Callable[..., list[ConsumedRecord]],
    start_ingest: Callable[..., Any],
    libcoap: Callable[..., Any],
) -> None:
    readings_topic, _ = topics
    server = libcoap()
    # libcoap's -d lets a PUT create a resource; such resources are observable and notify on PUT.
    server.put("/sensors", reading_json("s-1", "temperature", 20.25, T0))
    server.put("/lab/temp", json.dumps({"humidity": 41.0}).encode())
    ingest = start_ingest(
        None,
        KCQL=f"INSERT INTO {readings_topic} SELECT * FROM sensors, lab/temp",  # the seed's, with a second resource
        SOURCE_URI=f"coap://127.0.0.1:{server.port}",
        READINESS="all",
    )
    ingest.wait_ready()
    server.put("/sensors", reading_json("s-1", "temperature", 20.75, T0 + 1000))
    readings = read_readings(expected=3)
    assert ingest.terminate() == 0
    got = sorted((r.key, r.record["device_id"], r.record["metric"], r.record["value"]) for r in readings)  # type: ignore[index]
    # The payload's own device id wins; without one, the resource path is the device.
    assert got == [
        (b"lab/temp", "lab/temp", "humidity", 41.0),
        (b"s-1", "s-1", "temperature", 20.25),
        (b"s-1", "s-1", "temperature", 20.75),
    ]
    assert {r.record["source"] for r in readings} == {  # type: ignore[index]
        f"coap://127.0.0.1:{server.port}/sensors",
        f"coap://127.0.0.1:{server.port}/lab/temp",
    }
