"""The console as a process against the real stack: a real gateway's dead letter with its
reason, a replay put back exactly once and audited, a stopped persister's lag appearing and
clearing. Every topic, group, MQTT prefix and index is the test's own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from console_process import Console, aggregate, wait_for
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic

from fluxgate_console.deadletters import REPLAY_OF
from fluxgate_core.deadletter import dead_letter_headers
from fluxgate_core.schemas import REPLAY_AUDIT, TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder

pytestmark = pytest.mark.integration


def test_a_real_gateways_dead_letter_appears_with_its_reason(
    stack: Any, console: Callable[..., Console], tmp_path: Path
) -> None:
    readings = unique_topic("console.readings", stack.bootstrap)
    dead = unique_topic("console.deadletter", stack.bootstrap)
    prefix, port = f"console-{uuid.uuid4().hex[:8]}", free_port()
    route = {"filter": f"{prefix}/+/+", "topic": readings, "device_from": "topic:1", "metric_from": "topic:2"}
    proxy = ServiceProcess(
        [sys.executable, "-m", "fluxgate_mqtt_proxy"],
        {
            "FLUXGATE_MQTT_HTTP__HOST": "127.0.0.1", "FLUXGATE_MQTT_HTTP__PORT": str(port),
            "FLUXGATE_MQTT_ROUTES": json.dumps([route]), "FLUXGATE_MQTT_DEADLETTER_TOPIC": dead,
            "FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
            "FLUXGATE_MQTT_REGISTRY__URL": stack.registry_url,
            "FLUXGATE_MQTT_MQTT__HOST": stack.mqtt_host, "FLUXGATE_MQTT_MQTT__PORT": str(stack.mqtt_port),
            "FLUXGATE_MQTT_MQTT__CLIENT_ID": prefix, "FLUXGATE_MQTT_MQTT__SESSION_EXPIRY_S": "60",
        },
        health_port=port, log_path=tmp_path / "proxy.log", isolate_prefix="FLUXGATE_MQTT_",
    ).start(timeout=60)  # fmt: skip
    try:
        watched = [{"name": "mqtt-proxy", "urls": [f"http://127.0.0.1:{port}"], "role": "gateway",
                    "outputs": [readings, dead]}]  # fmt: skip
        seen = console(watched, [dead], unique_topic("console.replays", stack.bootstrap, partitions=1))
        subprocess.run(
            ["mosquitto_pub", "-h", stack.mqtt_host, "-p", str(stack.mqtt_port), "-q", "1",
             "-t", f"{prefix}/dev-9/temperature", "-m", '{"value": "warm"}'],
            check=True, timeout=10,
        )  # fmt: skip
        (letter,) = wait_for(seen.letters, 30, "the dead letter on the console")
        assert letter["service"] == "mqtt-proxy" and letter["source"] == f"{prefix}/dev-9/temperature"
        assert letter["reason"] and letter["headers"]["fluxgate.dlq.reason"] == letter["reason"]
        assert letter["error_class"] in {"PayloadError", "InvalidReading"}
        assert '"warm"' in letter["preview_text"] and letter["replay_target"] is None
        page = httpx.get(seen.url + "/", timeout=5).text
        assert letter["root_cause"].replace("'", "&#39;").replace('"', "&#34;") in page
        assert wait_for(lambda: seen.service("mqtt-proxy")["state"] == "ready", 10, "the proxy ready")
    finally:
        proxy.kill()


def test_replay_puts_a_record_back_exactly_once_audited(
    stack: Any, registry_client: Any, console: Callable[..., Console]
) -> None:
    readings = unique_topic("console.readings", stack.bootstrap)
    dead = unique_topic("console.deadletter", stack.bootstrap)
    audit = unique_topic("console.replays", stack.bootstrap, partitions=1)
    original = b"\x00\x00\x00\x00\x2a the original bytes"
    headers = [("origin", b"kept"), *dead_letter_headers(
        reason="unknown schema id 42: not registered when the job started", error_class="SerializationError",
        source=f"{readings}/0/5", service="aggregator",
    )]  # fmt: skip
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    producer.produce(dead, original, b"dev-3", headers=headers)
    assert producer.flush(10) == 0
    targets = json.dumps({dead: [readings]})
    seen = console([], [dead], audit, REPLAY__TARGETS=targets)
    (letter,) = wait_for(seen.letters, 30, "the fixed dead letter on the console")
    assert letter["replay_target"] == readings
    chosen = {"filter": {"reason": "schema id 42"}}
    plan = seen.post("/api/replay", chosen).json()
    assert [x["id"] for x in plan["send"]] == [letter["id"]] and plan["confirmed"] is False
    done = seen.post("/api/replay", {**chosen, "confirm": True})
    assert done.status_code == 200, done.text
    assert [r["target_topic"] for r in done.json()["sent"]] == [readings]
    again = seen.post("/api/replay", {**chosen, "confirm": True}).json()
    assert again["sent"] == [] and again["already_replayed"] == [letter["id"]]

    (back,) = consume(stack.bootstrap, readings, expected=1, timeout=15)  # and nothing more came
    assert back.value == original and back.key == b"dev-3"
    assert (REPLAY_OF, letter["id"].encode()) in back.headers and ("origin", b"kept") in back.headers
    time.sleep(1)
    assert len(consume(stack.bootstrap, readings, timeout=3)) == 1
    (audited,) = consume(stack.bootstrap, audit, expected=1, timeout=15)
    record = AvroDecoder(registry_client, schema_dict(REPLAY_AUDIT)).decode(audited.value)
    assert record["requested_by"] == "anonymous" and record["replay_id"] == done.json()["replay_id"]
    assert [(r["deadletter_topic"], r["target_topic"]) for r in record["records"]] == [(dead, readings)]

    # a console started afresh knows from the audit what was replayed
    fresh = console([], [dead], audit, REPLAY__TARGETS=targets)
    wait_for(fresh.letters, 30, "the dead letter on the second console")
    assert fresh.post("/api/replay", {**chosen, "confirm": True}).json()["already_replayed"] == [letter["id"]]


def test_lag_appears_while_a_persister_is_stopped_and_clears_when_it_is_back(
    stack: Any, registry_client: Any, elasticsearch: str, console: Callable[..., Console], tmp_path: Path
) -> None:
    topic = unique_topic("console.aggregated", stack.bootstrap, partitions=1)
    group, index, port = f"console-es-{uuid.uuid4().hex[:8]}", f"console-{uuid.uuid4().hex[:8]}", free_port()
    persister = ServiceProcess(
        [sys.executable, "-m", "fluxgate_es_persister"],
        {
            "FLUXGATE_ES_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, "FLUXGATE_ES_REGISTRY__URL": stack.registry_url,
            "FLUXGATE_ES_ELASTICSEARCH__HOSTS": json.dumps([elasticsearch]),
            "FLUXGATE_ES_HTTP__HOST": "127.0.0.1", "FLUXGATE_ES_HTTP__PORT": str(port),
            "FLUXGATE_ES_SINK__KCQL": f"INSERT INTO {index} SELECT * FROM {topic} PK device_id, metric, window_start",
            "FLUXGATE_ES_SINK__GROUP_ID": group, "FLUXGATE_ES_SINK__BATCH_AGE_MS": "100",
            "FLUXGATE_ES_SINK__DEADLETTER_TOPIC": f"{topic}.dlq", "FLUXGATE_ES_RETENTION__ENABLED": "false",
        },
        health_port=port, log_path=tmp_path / "persister.log", isolate_prefix="FLUXGATE_ES_",
    ).start(timeout=60)  # fmt: skip
    encoder = AvroEncoder.registered(
        registry_client, topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    start = datetime(2024, 1, 1, tzinfo=UTC)

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(topic, encoder.encode(aggregate(f"dev-{i}", start)), f"dev-{i}".encode())
        assert producer.flush(10) == 0

    watched = [{"name": "es-persister", "urls": [f"http://127.0.0.1:{port}"], "role": "persister", "group": group,
                "inputs": [topic], "store": "elasticsearch"}]  # fmt: skip
    try:
        seen = console(watched, [], unique_topic("console.replays", stack.bootstrap, partitions=1))
        send(0, 5)
        # caught up means the 5 committed: lag 0 alone is also what a snapshot from before they were sent says
        caught_up = [{"topic": topic, "partition": 0, "committed": 5, "end": 5, "lag": 0}]
        wait_for(lambda: (s := seen.service("es-persister"))["lag_by_partition"] == caught_up and s["state"] == "ready",
                 30, "caught up at first")  # fmt: skip
        persister.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
        send(5, 20)
        stuck = wait_for(lambda: (s := seen.service("es-persister"))["lag"] == 20 and s, 20, "lag while stopped")
        assert stuck["lag_by_partition"] == [{"topic": topic, "partition": 0, "committed": 5, "end": 25, "lag": 20}]
        assert wait_for(lambda: seen.service("es-persister")["state"] == "down", 20, "the stopped persister down")
        persister.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        back = wait_for(lambda: (s := seen.service("es-persister"))["lag"] == 0 and s["state"] == "ready" and s, 60,
                        "lag cleared")  # fmt: skip
        assert back["lag_by_partition"][0]["committed"] == 25
    finally:
        if persister.process is not None and persister.running:
            persister.process.send_signal(signal.SIGCONT)
        persister.kill()
        httpx.delete(f"{elasticsearch}/{index}*", timeout=10)
