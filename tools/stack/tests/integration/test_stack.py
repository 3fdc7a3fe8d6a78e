"""The real stack: every server serves a real client, and a broker restart is survived.

Starts whatever is not running yet (about 15 s from cold) and leaves it running, so the
next run of this or any other suite reuses it; `fluxgate-stack down` stops it.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from fluxgate_stack import Endpoints, Stack, ensure_up, kill, probes, restart, start, stop
from fluxgate_stack.topics import create_topics

pytestmark = pytest.mark.integration

READING = {
    "type": "record",
    "name": "Reading",
    "namespace": "dev.fluxgate.test",
    "fields": [{"name": "device", "type": "string"}, {"name": "value", "type": "double"}],
}


@pytest.fixture(scope="module")
def endpoints() -> Endpoints:
    return ensure_up(["kafka", "registry", "mosquitto"])


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


def test_up_is_idempotent_and_reuses_servers(endpoints: Endpoints) -> None:
    before = {s.name: s.pid for s in Stack().status()}
    assert ensure_up(["kafka", "registry", "mosquitto"]) == endpoints
    after = {s.name: (s.pid, s.state) for s in Stack().status()}
    for name in ("kafka", "registry", "mosquitto"):
        assert after[name] == (before[name], "ready")


def test_default_topics_exist(endpoints: Endpoints) -> None:
    topics = AdminClient({"bootstrap.servers": endpoints.bootstrap}).list_topics(timeout=10).topics
    for name in (
        "sensors.readings",
        "sensors.deadletter",
        "temperatures.aggregated",
        "temperatures.late",
        "devices.status",
    ):
        assert len(topics[name].partitions) == 3


def test_kafka_produce_and_consume(endpoints: Endpoints, unique: str) -> None:
    topic = f"stack-test-{unique}"
    assert create_topics(endpoints.bootstrap, {topic: 1}) == [topic]
    assert create_topics(endpoints.bootstrap, {topic: 1}) == []  # idempotent
    producer = Producer({"bootstrap.servers": endpoints.bootstrap})
    producer.produce(topic, key=b"k", value=b"hello")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": endpoints.bootstrap, "group.id": unique, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        message = next(m for m in iter(lambda: consumer.poll(1.0), "never") if m is not None and not m.error())
    finally:
        consumer.close()
    assert (message.key(), message.value()) == (b"k", b"hello")


def test_registry_speaks_confluent(endpoints: Endpoints, unique: str) -> None:
    client = SchemaRegistryClient({"url": endpoints.registry_url})
    subject = f"t-{unique}-value"
    schema_id = client.register_schema(subject, Schema(json.dumps(READING), "AVRO"))
    # The id in a record must be the one /schemas/ids/{id} serves, as with Confluent...
    served = httpx.get(f"{endpoints.registry_url}/schemas/ids/{schema_id}", timeout=5).json()
    assert json.loads(served["schema"])["name"] == "Reading"
    # ...and the same schema under another subject keeps its id (content ids, not global ids).
    assert client.register_schema(f"u-{unique}-value", Schema(json.dumps(READING), "AVRO")) == schema_id

    context = SerializationContext(f"t-{unique}", MessageField.VALUE)
    serializer = AvroSerializer(client, json.dumps(READING), conf={"auto.register.schemas": False})
    encoded = serializer({"device": "d1", "value": 21.5}, context)
    assert int.from_bytes(encoded[1:5], "big") == schema_id
    fresh_client = SchemaRegistryClient({"url": endpoints.registry_url})  # no cache: really fetches by id
    assert AvroDeserializer(fresh_client)(encoded, context) == {"device": "d1", "value": 21.5}


def test_registry_enforces_backward_compatibility(endpoints: Endpoints, unique: str) -> None:
    config = httpx.get(f"{endpoints.registry_url}/config", timeout=5).json()
    assert config["compatibilityLevel"] == "BACKWARD"
    client = SchemaRegistryClient({"url": endpoints.registry_url})
    subject = f"c-{unique}-value"
    client.register_schema(subject, Schema(json.dumps(READING), "AVRO"))
    required_field = {**READING, "fields": [*READING["fields"], {"name": "unit", "type": "string"}]}
    with pytest.raises(SchemaRegistryError) as rejected:
        client.register_schema(subject, Schema(json.dumps(required_field), "AVRO"))
    assert rejected.value.http_status_code == 409
    optional_field = {**READING, "fields": [*READING["fields"], {"name": "unit", "type": "string", "default": "C"}]}
    client.register_schema(subject, Schema(json.dumps(optional_field), "AVRO"))


def test_mqtt_round_trip(endpoints: Endpoints, unique: str) -> None:
    topic = f"stack-test/{unique}"
    args = ["mosquitto_sub", *_mqtt_args(endpoints), "-t", topic, "-q", "1", "-C", "1", "-W", "10"]
    with subprocess.Popen(args, stdout=subprocess.PIPE, text=True) as sub:
        # The subscription's start is not observable from here: publish until it lands.
        deadline = time.monotonic() + 10
        while sub.poll() is None and time.monotonic() < deadline:
            mqtt_pub(endpoints, topic, "21.5")
            time.sleep(0.2)
        assert sub.communicate(timeout=5)[0].strip() == "21.5"


@pytest.mark.serial(kills="mosquitto")
def test_persistent_session_survives_restart(endpoints: Endpoints, unique: str) -> None:
    topic, client_id = f"stack-test/{unique}", f"stack-test-{unique}"
    # A persistent (clean_session=false) QoS 1 subscription, then the client goes away...
    mqtt_sub(endpoints, topic, "-c", "-i", client_id, "-E")
    mqtt_pub(endpoints, topic, "queued while offline")
    restart("mosquitto")
    assert probes.mqtt_connect(endpoints.mqtt_host, endpoints.mqtt_port)
    # ...and gets the message that was queued for it before the restart.
    out = mqtt_sub(endpoints, topic, "-c", "-i", client_id, "-C", "1", "-W", "10")
    assert out.strip() == "queued while offline"


@pytest.mark.serial(kills="mosquitto")
def test_kill_then_start(endpoints: Endpoints) -> None:
    kill("mosquitto")
    assert not probes.mqtt_connect(endpoints.mqtt_host, endpoints.mqtt_port)
    start("mosquitto")
    assert probes.mqtt_connect(endpoints.mqtt_host, endpoints.mqtt_port)


def test_coap_server_on_demand(unique: str) -> None:
    url = start("coap-server").coap_url
    try:
        assert coap_client("-m", "put", "-e", "21.5", f"{url}/{unique}") == ""
        assert coap_client("-m", "get", f"{url}/{unique}").strip() == "21.5"
    finally:
        stop(["coap-server"])
    assert [s.state for s in Stack().status() if s.name == "coap-server"] == ["stopped"]


def mqtt_pub(endpoints: Endpoints, topic: str, message: str) -> None:
    subprocess.run(["mosquitto_pub", *_mqtt_args(endpoints), "-t", topic, "-q", "1", "-m", message], check=True)


def mqtt_sub(endpoints: Endpoints, topic: str, *extra: str) -> str:
    args = ["mosquitto_sub", *_mqtt_args(endpoints), "-t", topic, "-q", "1", *extra]
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=15).stdout


def coap_client(*args: str) -> str:
    return subprocess.run(["coap-client-notls", *args], check=True, capture_output=True, text=True, timeout=10).stdout


def _mqtt_args(endpoints: Endpoints) -> list[str]:
    return ["-h", endpoints.mqtt_host, "-p", str(endpoints.mqtt_port), "-V", "mqttv311"]
