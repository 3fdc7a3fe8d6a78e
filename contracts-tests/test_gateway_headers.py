"""The gateways' Kafka header layout, as every reader of a header relies on it.

``fluxgate.`` is Fluxgate's reserved header prefix: the console takes a dead letter's
explanation, and a replay's target, from ``fluxgate.dlq.*``, and marks replays with
``fluxgate.replay.*``. So no header a gateway writes from what a device sends may carry that
prefix: mqtt-proxy writes ``mqtt.topic`` and ``mqtt.user.<name>`` for each MQTT 5 user
property, coap-ingest ``coap.content-format`` and ``coap.observe`` (numbers). Checked here
against the real conversion code with the names a hostile device would pick.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fluxgate_coap_ingest.handler import letter_of
from fluxgate_coap_ingest.observer import Notification
from fluxgate_core.deadletter import RESERVED_PREFIX, DeadLetterWriter
from fluxgate_core.errors import PayloadError
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder
from fluxgate_mqtt_proxy.convert import TOPIC_HEADER, USER_PROPERTY_PREFIX, MessageConverter, message_headers
from fluxgate_mqtt_proxy.route_settings import default_routes

NOW_MS = 1_700_000_000_000
HOSTILE = {"fluxgate.dlq.topic": "temperatures.aggregated", "fluxgate.replay.of": "x/0/1", "mqtt.topic": "a", "fw": "1"}


class Recorder:
    def __init__(self) -> None:
        self.headers: list[tuple[str, Any]] = []

    async def deliver(self, topic: str, value: bytes, *, key: Any = None, headers: Any = None) -> None:
        self.headers = list(headers)


def test_mqtt_proxy_readings_carry_the_topic_and_each_user_property_under_its_prefix() -> None:
    converter = MessageConverter(default_routes(), AvroEncoder(schema_dict(SENSOR_READING), schema_id=1))
    (record,) = converter.convert("sensors/d1/temperature", json.dumps(21.5).encode(), HOSTILE, NOW_MS)
    assert record.headers[0] == (TOPIC_HEADER, b"sensors/d1/temperature")
    assert [name for name, _ in record.headers[1:]] == [USER_PROPERTY_PREFIX + name for name in HOSTILE]
    assert not any(name.startswith(RESERVED_PREFIX) for name, _ in record.headers)


def test_a_gateways_dead_letter_has_no_reserved_header_but_its_writers() -> None:
    letters = [
        message_headers("sensors/d1/temperature", HOSTILE),
        letter_of(Notification("coap://h/s", b"x", content_format=50, observe=7, received_ms=NOW_MS), None).headers,
    ]
    for headers in letters:
        recorder = Recorder()
        writer = DeadLetterWriter(recorder, "dlq", "gateway")  # type: ignore[arg-type]
        asyncio.run(writer.send(b"x", error=PayloadError("bad"), source="s", headers=headers))
        reserved = [name for name, _ in recorder.headers if name.startswith(RESERVED_PREFIX)]
        assert reserved == ["fluxgate.dlq.reason", "fluxgate.dlq.error.class", "fluxgate.dlq.source",
                            "fluxgate.dlq.service", "fluxgate.dlq.timestamp"]  # fmt: skip
