"""The CoAP source of the documents, run by ``fluxgate connect`` unchanged (server address and
topic by ``${VAR}``): coap-ingest observes ``/sensors`` on a real CoAP server (libcoap) and writes
each notification as Stream-Reactor's CoAP record (``coap-message``), the payload as bytes.
With the Hazelcast sink of the documents, the CoAP reference example against a topic that does not
exist: either config stops at start naming it; with ``topic.creation.*`` the source creates it and
a reading reaches the ``dev`` queue.

Needs issue #23's source-KCQL and CoAP-record work in coap-ingest (``FLUXGATE_COAP_KCQL``,
``FLUXGATE_COAP_SOURCE_URI``, ``FLUXGATE_COAP_OUTPUT_FORMAT``): it fails until that is merged.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from connect_fixtures import FIXTURES
from connect_runs import connect
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic
from hazelcast import HazelcastClient

from fluxgate_core.serde import AvroDecoder

pytestmark = pytest.mark.integration


@pytest.fixture
def coap_server() -> Iterator[int]:
    """libcoap's example server on a free UDP port; PUT creates observable resources (``-d``)."""
    binary = shutil.which("coap-server-notls")
    assert binary, "coap-server-notls missing: `fluxgate-stack install` (Debian libcoap3-bin) provides it"
    port = free_port(socket.SOCK_DGRAM)
    server = subprocess.Popen([binary, "-A", "127.0.0.1", "-p", str(port), "-d", "20"], stderr=subprocess.DEVNULL)
    yield port
    server.kill()
    server.wait(10)


def put(port: int, payload: bytes, timeout: float = 10.0) -> None:
    """PUT ``payload`` to /sensors, retrying while the server starts."""
    command = ["coap-client-notls", "-m", "put", "-t", "json", "-e", payload.decode(), "-B", "3",
               f"coap://127.0.0.1:{port}/sensors"]  # fmt: skip
    deadline = time.monotonic() + timeout
    while subprocess.run(command, capture_output=True, timeout=10, check=False).returncode != 0:
        assert time.monotonic() < deadline, "the CoAP server did not take a PUT"
        time.sleep(0.1)


def test_the_coap_source_config_writes_coap_messages(stack: Any, registry_client: Any, coap_server: int) -> None:
    topic = unique_topic("connect.coap_sensor_topic", stack.bootstrap, 1)
    first, second = b'{"sensorId": "s-1", "temperature": 20.5}', b'{"sensorId": "s-1", "temperature": 21}'
    put(coap_server, first)
    placeholders = {"COAP_HOST": "127.0.0.1", "COAP_PORT": str(coap_server), "COAP_SENSOR_TOPIC": topic}
    with connect("coap-source.properties", "FLUXGATE_COAP_", stack, placeholders) as ingest:
        ingest.start()
        records = consume(stack.bootstrap, topic, expected=1, decoder=AvroDecoder(registry_client), timeout=30)
        assert records, f"nothing on {topic}: {ingest.log_tail()}"
        put(coap_server, second)
        records = consume(stack.bootstrap, topic, expected=2, decoder=AvroDecoder(registry_client), timeout=30)
        assert ingest.terminate() == 0, ingest.log_tail()
    assert [record.record["payload"] for record in records] == [first, second]
    assert "running coap-ingest" in ingest.log_text()


# Issue #37, topics that do not exist: the CoAP reference example (this source, then the Hazelcast
# sink of the documents on the same topic) against a stack whose brokers create no topic on use.


def missing_topic(stack: Any) -> str:
    """A topic name no one has created."""
    name = f"connect.coap_sensor_topic.missing.{uuid.uuid4().hex[:10]}"
    assert name not in AdminClient({"bootstrap.servers": stack.bootstrap}).list_topics(timeout=30).topics
    return name


def exits_naming(service: ServiceProcess, *parts: str) -> None:
    """``service`` stops by itself with exit 2, never ready, its last line naming every part."""
    service.start(wait_ready=False)
    assert service.wait(60) == 2, service.log_tail()
    assert not service.ready()
    said = service.log_text()
    assert all(part in said for part in parts), said


@pytest.mark.parametrize(
    ("fixture", "prefix", "setting"),
    [
        ("coap-source.properties", "FLUXGATE_COAP_", "FLUXGATE_COAP_KCQL"),
        ("hazelcast-sink.properties", "FLUXGATE_HZ_", "FLUXGATE_HZ_SINK__KCQL"),
    ],
    ids=["coap-source", "hazelcast-sink"],
)
def test_a_missing_topic_stops_either_config_at_start_naming_it_and_the_command(
    stack: Any, fixture: str, prefix: str, setting: str
) -> None:
    topic = missing_topic(stack)
    placeholders = {"COAP_HOST": "127.0.0.1", "COAP_PORT": str(free_port(socket.SOCK_DGRAM)),
                    "COAP_SENSOR_TOPIC": topic, "HAZELCAST_MEMBERS": "127.0.0.1:1"}  # fmt: skip
    command = f"kafka-topics.sh --bootstrap-server {stack.bootstrap} --create --topic {topic} --partitions 3"
    with connect(fixture, prefix, stack, placeholders) as service:
        exits_naming(service, f"[env {setting}]: {topic}: no such topic", command, f"{prefix}KAFKA__TOPIC_CREATION")


def test_the_reference_example_with_topic_creation_moves_a_reading_into_the_dev_queue(
    stack: Any, coap_server: int, dev_member: str, tmp_path: Path
) -> None:
    """The source config with Kafka Connect's topic.creation keys creates its topic (2 partitions,
    the retention asked) and becomes ready; the sink config then reads it into Hazelcast."""
    topic = missing_topic(stack)
    source = tmp_path / "coap-source.properties"
    source.write_text((FIXTURES / "coap-source.properties").read_text() + CREATION)
    reading = f'{{"sensorId": "s-37-{uuid.uuid4().hex[:6]}", "temperature": 19.5}}'.encode()
    put(coap_server, reading)
    placeholders = {"COAP_HOST": "127.0.0.1", "COAP_PORT": str(coap_server), "COAP_SENSOR_TOPIC": topic,
                    "HAZELCAST_MEMBERS": dev_member}  # fmt: skip
    with connect(source, "FLUXGATE_COAP_", stack, placeholders) as ingest:
        ingest.start()  # ready: the topic is there
        assert partitions_and_retention(stack, topic) == (2, "3600000")
        assert "kafka.topic.created" in ingest.log_text()
        with connect("hazelcast-sink.properties", "FLUXGATE_HZ_", stack, placeholders) as persister:
            persister.start()
            client = HazelcastClient(cluster_members=[dev_member], cluster_name="dev", cluster_connect_timeout=30)
            try:
                queue = client.get_queue("dev").blocking()
                persister.wait_until(lambda: reading in payloads(queue), "the reading in the dev queue", 60)
            finally:
                client.shutdown()
            assert persister.terminate() == 0, persister.log_tail()
        assert ingest.terminate() == 0, ingest.log_tail()


CREATION = """
topic.creation.default.partitions = 2
topic.creation.default.replication.factor = 1
topic.creation.default.retention.ms = 3600000
"""


def partitions_and_retention(stack: Any, topic: str) -> tuple[int, str]:
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    count = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    return count, configs["retention.ms"].value


def payloads(queue: Any) -> list[bytes]:
    """The CoAP payloads in the queue (base64 in the JSON of a CoAP record)."""
    items = [json.loads(item.to_string() if hasattr(item, "to_string") else item) for item in queue.iterator()]
    return [base64.b64decode(item["payload"]) for item in items if "payload" in item]
