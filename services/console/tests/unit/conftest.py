"""The console's unit fixtures: the local pipeline as recorded (see console_recorded)."""

from __future__ import annotations

import pytest
from console_recorded import (
    NO_STORES,
    NOT_READY,
    READY,
    TEST_HOST,
    RecordedKafka,
    Services,
    group_answer,
    metrics_text,
)

from fluxgate_console.settings import ConsoleSettings


@pytest.fixture
def services() -> Services:
    """The whole local pipeline answering: every service ready, with recorded metrics; the
    es-persister's store down (not ready), coap-ingest down, scylla-persister garbage."""
    answering = Services()
    answering.answers = {
        9101: (200, READY, metrics_text("mqtt-proxy")),
        9103: (200, READY, metrics_text("aggregator")),
        9104: (503, NOT_READY, metrics_text("es-persister-store-down")),
        9105: (200, READY, metrics_text("garbage")),
        9106: (200, READY, metrics_text("es-persister-store-down").replace("store_up 0.0", "store_up 1.0")),
        9107: (200, READY, metrics_text("device-status")),
    }
    return answering


@pytest.fixture
def kafka() -> RecordedKafka:
    return RecordedKafka(
        {
            "sensors.readings": {0: 4000, 1: 4000, 2: 3880},
            "temperatures.aggregated": {0: 900, 1: 900, 2: 900},
            "sensors.deadletter": {0: 40, 1: 40, 2: 40},
        },
        {
            "fluxgate-aggregator": group_answer("sensors.readings", {0: 4000, 1: 4000, 2: 3880}),
            "fluxgate-device-status": group_answer("sensors.readings", {0: 3990, 1: 4000, 2: 3880}, members=2),
            "fluxgate-es-persister": group_answer("temperatures.aggregated", {0: 100, 1: 100, 2: 100}),
            "fluxgate-hazelcast-persister": group_answer("temperatures.aggregated", {0: 900, 1: 900, 2: 900}),
            # scylla-persister's group: Kafka times out describing it
        },
    )


@pytest.fixture
def settings() -> ConsoleSettings:
    return ConsoleSettings.model_validate(
        {"page_auth": {"mode": "none"}, "replay_auth": {"mode": "none"}, **NO_STORES, **TEST_HOST}
    )
