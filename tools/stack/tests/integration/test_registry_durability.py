"""The registry keeps schemas across restarts (KafkaSQL storage: a journal topic in Kafka).

Runs a throw-away Kafka and registry of its own (own ports, own ``.local`` under a temp
folder, the shared downloads linked in), so restarting them disturbs nobody's stack.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from fluxgate_stack import Endpoints
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.stack import Stack

pytestmark = pytest.mark.integration

TOPIC = "durable.readings"
SUBJECT = f"{TOPIC}-value"
SCHEMA = (
    '{"type": "record", "name": "Reading", "namespace": "dev.fluxgate.test",'
    ' "fields": [{"name": "device", "type": "string"}, {"name": "value", "type": "double"}]}'
)
OTHER = '{"type": "record", "name": "Other", "namespace": "dev.fluxgate.test", "fields": []}'


@pytest.fixture(scope="module")
def private_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("durable")
    shared = StackSettings().local_dir / "dist"
    (home / ".local").mkdir()
    (home / ".local" / "dist").symlink_to(shared)
    ports = free_ports(4)
    settings = StackSettings(
        home=home,
        kafka_port=ports[0],
        kafka_controller_port=ports[1],
        registry_port=ports[2],
        kafka_secure_port=ports[3],
        topics=f"{TOPIC}:1",
        kafka_heap="256m",
        registry_heap="256m",
    )
    stack = Stack(settings)
    try:
        yield stack
    finally:
        stack.down()


def test_a_restart_of_the_registry_or_of_kafka_keeps_every_id(private_stack: Stack) -> None:
    endpoints = private_stack.up(["registry"])  # Kafka comes up first: the registry needs it
    first = register(endpoints, SUBJECT, SCHEMA)
    seconds = timed(lambda: restart_registry(private_stack))
    assert schema_text(endpoints, first) == SCHEMA  # Apicurio answers the text as registered
    print(f"registry restart: {seconds:.1f}s")
    # Kafka restarted under a running registry (a crash, a test's broker restart): the
    # registry reconnects, and ids go on from where they were, never from 1 again.
    private_stack.down(["kafka"])
    private_stack.up(["kafka"])
    assert eventually(lambda: register(endpoints, "durable.other-value", OTHER)) > first
    assert schema_text(endpoints, first) == SCHEMA


def test_records_written_before_a_whole_stack_restart_decode(private_stack: Stack) -> None:
    endpoints = private_stack.up(["registry"])
    values = [{"device": f"d{i}", "value": float(i)} for i in range(5)]
    produce(endpoints, values)
    private_stack.down()
    endpoints = private_stack.up(["registry"])
    assert values == consume(endpoints, len(values))[-len(values) :]


def register(endpoints: Endpoints, subject: str, schema: str) -> int:
    response = httpx.post(
        f"{endpoints.registry_url}/subjects/{subject}/versions",
        json={"schema": schema},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=10,
    )
    response.raise_for_status()
    return int(response.json()["id"])


def schema_text(endpoints: Endpoints, schema_id: int) -> str:
    response = httpx.get(f"{endpoints.registry_url}/schemas/ids/{schema_id}", timeout=10)
    response.raise_for_status()
    return str(response.json()["schema"])


def restart_registry(stack: Stack) -> None:
    stack.down(["registry"])
    stack.up(["registry"])


def produce(endpoints: Endpoints, values: list[dict[str, Any]]) -> None:
    registry = SchemaRegistryClient({"url": endpoints.registry_url})
    serialize = AvroSerializer(registry, SCHEMA)
    producer = Producer({"bootstrap.servers": endpoints.bootstrap})
    for value in values:
        producer.produce(TOPIC, serialize(value, SerializationContext(TOPIC, MessageField.VALUE)))
    assert producer.flush(10) == 0


def consume(endpoints: Endpoints, count: int) -> list[dict[str, Any]]:
    # A fresh client: nothing cached, every id is looked up in the restarted registry.
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": endpoints.registry_url}))
    consumer = Consumer(
        {"bootstrap.servers": endpoints.bootstrap, "group.id": "durable", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    decoded: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    try:
        while len(decoded) < count and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                decoded.append(deserialize(message.value(), SerializationContext(TOPIC, MessageField.VALUE)))
    finally:
        consumer.close()
    return decoded


def eventually(action: Callable[[], int], timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def timed(action: Callable[[], None]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
