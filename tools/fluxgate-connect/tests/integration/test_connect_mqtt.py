"""An MQTT source config, run by ``fluxgate connect``: mqtt-proxy subscribes the KCQL's filter on
the real Mosquitto and writes each JSON message as a SensorReading to the KCQL's topic, keyed
WITHKEY(sensorId); in Avro, or with value.converter JsonConverter as the JSON its consumers read.
With tasks.max=2, two proxies share the subscription ($share): each message
is delivered by one of them."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from connect_fixtures import FIXTURES, with_tasks
from connect_runs import connect, member, record_count
from fluxgate_testing import consume, unique_topic

from fluxgate_core.serde import AvroDecoder

pytestmark = pytest.mark.integration


def publish(stack: Any, topic: str, messages: list[str], qos: int = 1) -> None:
    subprocess.run(
        ["mosquitto_pub", "-h", stack.mqtt_host, "-p", str(stack.mqtt_port), "-q", str(qos), "-t", topic, "-l"],
        input="\n".join(messages) + "\n", text=True, check=True, timeout=60,
    )  # fmt: skip


def placeholders_of(stack: Any, readings: str, prefix: str) -> dict[str, str]:
    """The stack's broker; the test's Kafka topic, MQTT topics (``<prefix>/+``) and client id."""
    return {"MQTT_HOST": stack.mqtt_host, "MQTT_PORT": str(stack.mqtt_port), "READINGS_TOPIC": readings,
            "MQTT_PREFIX": prefix, "MQTT_CLIENT_ID": prefix}  # fmt: skip


def readings_of(count: int) -> list[str]:
    return [json.dumps({"sensorId": f"d{n}", "temperature": 20 + n}) for n in range(count)]


def test_the_mqtt_source_config_moves_messages_into_its_topic(stack: Any, registry_client: Any) -> None:
    readings = unique_topic("connect.mqtt.readings", stack.bootstrap, 1)
    prefix = f"connect-{uuid.uuid4().hex[:8]}"
    placeholders = placeholders_of(stack, readings, prefix)
    with connect("mqtt-source-local.properties", "FLUXGATE_MQTT_", stack, placeholders) as proxy:
        proxy.start()
        publish(stack, f"{prefix}/room", readings_of(5))
        got = consume(stack.bootstrap, readings, expected=5, decoder=AvroDecoder(registry_client), timeout=60)
        assert proxy.terminate() == 0, proxy.log_tail()
    assert sorted((r.key, r.record["device_id"], r.record["value"]) for r in got) == [
        (f"d{n}".encode(), f"d{n}", 20.0 + n) for n in range(5)
    ]
    assert "running mqtt-proxy" in proxy.log_text()


def test_a_json_converter_config_writes_what_a_json_converter_consumer_reads(stack: Any) -> None:
    readings = unique_topic("connect.mqtt.readings", stack.bootstrap, 1)
    prefix = f"connect-{uuid.uuid4().hex[:8]}"
    placeholders = placeholders_of(stack, readings, prefix)
    with connect("mqtt-source-local-json.properties", "FLUXGATE_MQTT_", stack, placeholders) as proxy:
        proxy.start()
        publish(stack, f"{prefix}/room", readings_of(3))
        got = consume(stack.bootstrap, readings, expected=3, timeout=60)
        assert proxy.terminate() == 0, proxy.log_tail()
    envelopes = [json.loads(record.value) for record in got]  # plain JSON: no registry, no wire format
    assert all(envelope.keys() == {"schema", "payload"} for envelope in envelopes)
    schema = envelopes[0]["schema"]
    assert (schema["type"], schema["name"], schema["optional"]) == (
        "struct",
        "io.fluxgate.sensors.SensorReading",
        False,
    )
    fields = {field["field"]: field for field in schema["fields"]}
    timestamp = {"type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}
    assert fields["event_time"] == {**timestamp, "field": "event_time"}
    assert fields["value"] == {"type": "float64", "optional": False, "field": "value"}
    assert fields["sequence"] == {"type": "int64", "optional": True, "field": "sequence"}
    payloads = sorted((record.key, envelope["payload"]) for record, envelope in zip(got, envelopes, strict=True))
    assert [(key, p["device_id"], p["value"]) for key, p in payloads] == [
        (f"d{n}".encode(), f"d{n}", 20.0 + n) for n in range(3)
    ]
    assert all(p["source"] == f"{prefix}/room" and p["unit"] is not None for _, p in payloads)


def test_two_tasks_share_the_subscription_and_deliver_each_message_once(
    stack: Any, registry_client: Any, tmp_path: Path
) -> None:
    readings = unique_topic("connect.mqtt.readings", stack.bootstrap, 1)
    prefix = f"connect-{uuid.uuid4().hex[:8]}"
    config = with_tasks("mqtt-source-local.properties", tmp_path, 2, connector=prefix)  # its own $share group
    placeholders = placeholders_of(stack, readings, prefix)
    count = 40
    with connect(config, "FLUXGATE_MQTT_", stack, placeholders, tasks=2) as proxy:
        proxy.start()
        second = member(proxy, 1)
        proxy.wait_until(second.ready, "member 1 subscribed (/readyz)", 60)
        publish(stack, f"{prefix}/room", readings_of(count))
        consume(stack.bootstrap, readings, expected=count, timeout=60, idle=0)
        handled = [proxy.metric("fluxgate_mqtt_messages_total"), second.metric("fluxgate_mqtt_messages_total")]
        assert proxy.terminate() == 0, proxy.log_tail()
    # Both have drained and stopped: the topic holds all they will ever write.
    assert record_count(stack.bootstrap, readings) == count
    got = consume(stack.bootstrap, readings, expected=count, decoder=AvroDecoder(registry_client), timeout=60, idle=0)
    assert sorted(r.record["device_id"] for r in got) == sorted(f"d{n}" for n in range(count))
    assert sum(handled) == count and all(handled), f"messages per member: {handled}"  # each got its share
    log = proxy.log_text()
    for index in (0, 1):  # each its own client id (one id for two would have the broker drop one)
        assert f"FLUXGATE_MQTT_MQTT__CLIENT_ID={prefix}-{index}" in log and f"mqtt-proxy-{index} | " in log


def test_quality_of_service_2_moves_each_message_once_and_completes_every_exchange(
    stack: Any, registry_client: Any, tmp_path: Path
) -> None:
    readings = unique_topic("connect.mqtt.readings", stack.bootstrap, 1)
    prefix = f"connect-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "mqtt-source-qos2.properties"
    text = (FIXTURES / "mqtt-source-local.properties").read_text()
    config.write_text(text.replace("connect.mqtt.service.quality=1", "connect.mqtt.service.quality=2"))
    # The broker sends at most 5 QoS 2 messages the proxy has not completed (PUBREC, PUBREL,
    # PUBCOMP): an exchange left open would hold its slot, and 40 messages would stop at 5.
    placeholders = placeholders_of(stack, readings, prefix) | {"FLUXGATE_MQTT_MQTT__RECEIVE_MAXIMUM": "5"}
    count = 40
    with connect(config, "FLUXGATE_MQTT_", stack, placeholders) as proxy:
        proxy.start()
        publish(stack, f"{prefix}/room", readings_of(count), qos=2)
        consume(stack.bootstrap, readings, expected=count, timeout=60, idle=0)
        by_qos = proxy.metric("fluxgate_mqtt_messages_total", qos="2")
        assert proxy.terminate() == 0, proxy.log_tail()
    assert record_count(stack.bootstrap, readings) == count  # drained and stopped: no copy came after
    got = consume(stack.bootstrap, readings, expected=count, decoder=AvroDecoder(registry_client), timeout=60, idle=0)
    assert sorted(r.record["device_id"] for r in got) == sorted(f"d{n}" for n in range(count))
    assert by_qos == count  # delivered at QoS 2: a subscription at 1 would have capped them at 1
