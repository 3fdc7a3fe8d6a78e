"""The seed's flow whole, against the real servers: a CoAP resource observed by coap-ingest with
output_format coap-message, each response a CoapMessage record on its topic, the Hazelcast persister
(``INSERT INTO <queue> SELECT * FROM <topic> WITHFORMAT JSON STOREAS QUEUE``, Stream-Reactor's seed
statement) writing them into a queue, read as JSON by a client of the test's own."""

from __future__ import annotations

import base64
import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic
from hazelcast import HazelcastClient

from fluxgate_core.serde import AvroDecoder

pytestmark = pytest.mark.integration
PERSISTER = Path(sys.executable).with_name("fluxgate-hazelcast-persister")
FIRST = b'{"temperature": 21.5}'
LATER = [b"22.25", b"not a reading at all", b'{"temperature": 23}']


@pytest.fixture
def queue_client(hazelcast: tuple[str, str]) -> Iterator[Any]:
    address, cluster = hazelcast
    client = HazelcastClient(cluster_members=[address], cluster_name=cluster, cluster_connect_timeout=30)
    yield client
    client.shutdown()


@pytest.fixture
def start_persister(stack: Any, hazelcast: tuple[str, str], tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    started: list[ServiceProcess] = []

    def start(kcql: str, deadletters: str) -> ServiceProcess:
        address, cluster = hazelcast
        port = free_port()
        env = {
            "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
            "REGISTRY__URL": stack.registry_url,
            "HTTP__HOST": "127.0.0.1",
            "HTTP__PORT": str(port),
            "HAZELCAST__MEMBERS": json.dumps([address]),
            "HAZELCAST__CLUSTER_NAME": cluster,
            "SINK__KCQL": kcql,
            "SINK__GROUP_ID": f"test-coap-messages-{uuid.uuid4().hex[:8]}",
            "SINK__BATCH_AGE_MS": "100",
            "SINK__DEADLETTER_TOPIC": deadletters,
        }
        process = ServiceProcess(
            [str(PERSISTER)],
            {f"FLUXGATE_HZ_{name}": value for name, value in env.items()},
            health_port=port,
            log_path=tmp_path / "hazelcast-persister.log",
            isolate_prefix="FLUXGATE_HZ_",
        )
        started.append(process.start())
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def coap_topic(stack: Any) -> str:
    """A fresh topic for the CoapMessage records, named like the seed's."""
    return unique_topic("coap_sensor_topic", stack.bootstrap)


def taken(queue: Any, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """``count`` items taken from the queue, in order, as JSON; fewer if they do not come in time."""
    items = []
    for _ in range(count):
        item = queue.poll(timeout)
        if item is None:
            break
        items.append(json.loads(item.to_string()))
    return items


def test_observed_responses_reach_a_hazelcast_queue_whole_as_json(
    stack: Any,
    topics: tuple[str, str],
    coap_topic: str,
    decoder: AvroDecoder,
    registry_client: Any,
    start_ingest: Callable[..., Any],
    start_persister: Callable[..., ServiceProcess],
    libcoap: Callable[..., Any],
    queue_client: Any,
) -> None:
    _, dead_letter_topic = topics
    server = libcoap()
    uri = f"coap://127.0.0.1:{server.port}/sensors"
    server.put("/sensors", FIRST)  # libcoap's -d: a PUT creates an observable resource
    ingest = start_ingest([{"uri": uri, "topic": coap_topic}], OUTPUT_FORMAT="coap-message")
    ingest.wait_ready()
    # Observe is eventually consistent (RFC 7641): while a confirmable notification is not yet
    # acknowledged, libcoap sends no other, and the next one carries the newest state, so a
    # state replaced meanwhile is never sent (one CI run lost "not a reading at all" so). Each
    # state waits for its own notification on the topic before the next one is put.
    for seen, payload in enumerate(LATER, start=1):
        consume(stack.bootstrap, coap_topic, expected=seen, decoder=decoder, timeout=30, idle=0)
        server.put("/sensors", payload)
    records = consume(stack.bootstrap, coap_topic, expected=4, decoder=decoder, timeout=30, idle=0.5)

    queue_name = f"dev-{uuid.uuid4().hex[:8]}"
    persister = start_persister(
        f"INSERT INTO {queue_name} SELECT * FROM {coap_topic} WITHFORMAT JSON STOREAS QUEUE", dead_letter_topic
    )
    queue = queue_client.get_queue(queue_name).blocking()
    items = taken(queue, 4)
    assert ingest.terminate() == 0 and persister.terminate() == 0

    # On the topic: one CoapMessage per response, every payload (readable or not), keyed by the resource.
    subject = registry_client.get_latest_version(f"{coap_topic}-value")
    assert json.loads(subject.schema.schema_str)["name"] == "CoapMessage"
    assert [r.record["payload"] for r in records] == [FIRST, *LATER]
    assert {r.key for r in records} == {uri.encode()}
    assert not consume(stack.bootstrap, dead_letter_topic, timeout=2, idle=0.5)

    # In the queue: the same responses, in order, as JSON, fields as the CoAP responses had them.
    assert [base64.b64decode(item["payload"]) for item in items] == [FIRST, *LATER]
    # libcoap's dynamic resource keeps the media type it was created with (-t json): 50 each time.
    assert [item["content_format"] for item in items] == [50] * 4
    assert all((item["code"], item["raw_code"], item["is_notification"]) == ("2.05", 69, True) for item in items)
    assert all(item["source"] == f"127.0.0.1:{server.port}" and item["is_duplicate"] is False for item in items)
    observes = [item["observe"] for item in items]
    assert observes == sorted(observes) and len(set(observes)) == 4, observes  # one registration, in order
    assert len({item["token"] for item in items}) == 1 and items[0]["token"]  # the registration's token
    assert {item["type"] for item in items} <= {"CON", "NON", "ACK"}
    assert all(item["ingest_time"] == item["timestamp"] and item["rtt"] >= 0 for item in items)
    assert [item["message_id"] for item in items] == [r.record["message_id"] for r in records]
    assert items[0]["max_age"] >= 0 and items[0]["block2"] == "" and items[0]["etags"] == []


def test_an_error_response_is_a_record_and_the_observation_is_registered_again(
    stack: Any,
    topics: tuple[str, str],
    coap_topic: str,
    decoder: AvroDecoder,
    start_ingest: Callable[..., Any],
    libcoap: Callable[..., Any],
) -> None:
    _, dead_letter_topic = topics
    server = libcoap()
    uri = f"coap://127.0.0.1:{server.port}/not-there"
    ingest = start_ingest([{"uri": uri, "topic": coap_topic}], OUTPUT_FORMAT="coap-message")
    records = consume(stack.bootstrap, coap_topic, expected=2, decoder=decoder, timeout=30, idle=0)
    server.put("/not-there", FIRST)  # the resource appears: the next registration observes it
    answered = consume(
        stack.bootstrap, coap_topic, decoder=decoder, timeout=30, idle=0,
        complete=lambda got: any(r.record["code"] == "2.05" for r in got),
    )  # fmt: skip
    assert ingest.terminate() == 0
    refusals = [r.record for r in records]
    assert all(
        (r["code"], r["raw_code"], r["is_notification"], r["observe"]) == ("4.04", 132, False, None) for r in refusals
    )
    content = next(r.record for r in answered if r.record["code"] == "2.05")
    assert content["payload"] == FIRST and content["is_notification"] is True
    assert not consume(stack.bootstrap, dead_letter_topic, timeout=2, idle=0.5)
