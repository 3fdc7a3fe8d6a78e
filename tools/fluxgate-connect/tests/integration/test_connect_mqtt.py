"""An MQTT source config, run by ``fluxgate connect``: mqtt-proxy subscribes the KCQL's filter on
the real Mosquitto and writes each JSON message as a SensorReading to the KCQL's topic, keyed
WITHKEY(sensorId)."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest
from connect_runs import connect
from fluxgate_testing import consume, unique_topic

from fluxgate_core.serde import AvroDecoder

pytestmark = pytest.mark.integration


def test_the_mqtt_source_config_moves_messages_into_its_topic(stack: Any, registry_client: Any) -> None:
    readings = unique_topic("connect.mqtt.readings", stack.bootstrap, 1)
    prefix = f"connect-{uuid.uuid4().hex[:8]}"
    placeholders = {"MQTT_HOST": stack.mqtt_host, "MQTT_PORT": str(stack.mqtt_port), "READINGS_TOPIC": readings,
                    "MQTT_PREFIX": prefix, "MQTT_CLIENT_ID": prefix}  # fmt: skip
    messages = [json.dumps({"sensorId": f"d{n}", "temperature": 20 + n}) for n in range(5)]
    with connect("mqtt-source-local.properties", "FLUXGATE_MQTT_", stack, placeholders) as proxy:
        proxy.start()
        subprocess.run(
            ["mosquitto_pub", "-h", stack.mqtt_host, "-p", str(stack.mqtt_port), "-q", "1", "-t", f"{prefix}/room",
             "-l"], input="\n".join(messages) + "\n", text=True, check=True, timeout=60,
        )  # fmt: skip
        got = consume(stack.bootstrap, readings, expected=5, decoder=AvroDecoder(registry_client), timeout=60)
        assert proxy.terminate() == 0, proxy.log_tail()
    assert sorted((r.key, r.record["device_id"], r.record["value"]) for r in got) == [
        (f"d{n}".encode(), f"d{n}", 20.0 + n) for n in range(5)
    ]
    assert "running mqtt-proxy" in proxy.log_text()
