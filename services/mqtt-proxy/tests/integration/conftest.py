"""A real proxy process per test, on its own client id, MQTT prefix and Kafka topics."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroDecoder


@dataclass
class Setup:
    """One test's world: a Kafka topic pair, an MQTT prefix, and a way to start proxies."""

    stack: Any
    readings: str
    deadletters: str
    prefix: str
    tmp: Path
    decoder: AvroDecoder
    proxies: list[ServiceProcess] = field(default_factory=list)

    def proxy(self, client_id: str | None = None, **extra: str) -> ServiceProcess:
        route = {
            "filter": f"{self.prefix}/+/+",
            "topic": self.readings,
            "device_from": "topic:1",
            "metric_from": "topic:2",
        }
        port = free_port()
        env = {
            "FLUXGATE_MQTT_HTTP__PORT": str(port),
            "FLUXGATE_MQTT_ROUTES": json.dumps([{**route, "qos": int(extra.pop("QOS", "2"))}]),
            "FLUXGATE_MQTT_DEADLETTER_TOPIC": self.deadletters,
            "FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS": self.stack.bootstrap,
            "FLUXGATE_MQTT_REGISTRY__URL": self.stack.registry_url,
            "FLUXGATE_MQTT_MQTT__HOST": self.stack.mqtt_host,
            "FLUXGATE_MQTT_MQTT__PORT": str(self.stack.mqtt_port),
            "FLUXGATE_MQTT_MQTT__CLIENT_ID": client_id or f"test-{uuid.uuid4().hex[:8]}",
            "FLUXGATE_MQTT_MQTT__RECONNECT_MAX_S": "2",
            # Sessions of killed test proxies must not pile up on the shared broker.
            "FLUXGATE_MQTT_MQTT__SESSION_EXPIRY_S": "300",
            "FLUXGATE_MQTT_HTTP__HOST": "127.0.0.1",
            **{f"FLUXGATE_MQTT_{key}": value for key, value in extra.items()},
        }
        if "KCQL" in extra:  # KCQL instead of routes: setting both is an error
            del env["FLUXGATE_MQTT_ROUTES"]
        proxy = ServiceProcess(
            [sys.executable, "-m", "fluxgate_mqtt_proxy"],
            env,
            health_port=port,
            log_path=self.tmp / f"proxy-{len(self.proxies)}.log",
            isolate_prefix="FLUXGATE_MQTT_",
        )
        self.proxies.append(proxy)
        return proxy

    def publish(self, messages: list[tuple[str, str]], qos: int, *options: str) -> None:
        """mosquitto_pub, one process per topic, payload lines on stdin (-l)."""
        by_topic: dict[str, list[str]] = {}
        for topic, payload in messages:
            by_topic.setdefault(topic, []).append(payload)
        for topic, payloads in by_topic.items():
            subprocess.run(
                ["mosquitto_pub", "-h", self.stack.mqtt_host, "-p", str(self.stack.mqtt_port), "-q", str(qos),
                 "-t", topic, "-l", *options],
                input="\n".join(payloads) + "\n", text=True, check=True, timeout=60,
            )  # fmt: skip

    def readings_in_kafka(self, expected: int, timeout: float = 60.0) -> list[ConsumedRecord]:
        return consume(self.stack.bootstrap, self.readings, expected=expected, timeout=timeout, decoder=self.decoder)

    def sequences_in_kafka(self, sequences: set[int], timeout: float = 90.0) -> collections.Counter[int]:
        """How often each sequence number arrived, read until every one of ``sequences`` has
        (at least once delivery: duplicates are allowed, so a count alone proves nothing)."""

        def every_one(got: list[ConsumedRecord]) -> bool:
            return sequences <= {item.record["sequence"] for item in got if item.record}

        got = consume(self.stack.bootstrap, self.readings, timeout=timeout, decoder=self.decoder, complete=every_one)
        return collections.Counter(item.record["sequence"] for item in got if item.record)


@pytest.fixture
def setup(stack: Any, registry_client: Any, tmp_path: Path) -> Iterator[Setup]:
    world = Setup(
        stack=stack,
        readings=unique_topic("test.readings", stack.bootstrap),
        deadletters=unique_topic("test.deadletter", stack.bootstrap),
        prefix=f"it-{uuid.uuid4().hex[:8]}",
        tmp=tmp_path,
        decoder=AvroDecoder(registry_client, schema_dict(SENSOR_READING)),
    )
    yield world
    for proxy in world.proxies:
        proxy.kill()
