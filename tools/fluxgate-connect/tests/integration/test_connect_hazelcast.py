"""The Hazelcast sink of the documents, run by ``fluxgate connect`` unchanged: Avro aggregates on
its topic end up as JSON in the Hazelcast queue ``dev``, read back by a separate client. With
tasks.max=2, two persisters share the work as static members of the connector's group."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from connect_fixtures import with_tasks
from connect_runs import (
    aggregates,
    committed,
    connect,
    group_members,
    lines,
    member,
    produce_aggregates,
    produce_to,
    run_until,
)
from fluxgate_testing import consume, unique_topic
from hazelcast import HazelcastClient

from fluxgate_core import deadletter as dlq

pytestmark = pytest.mark.integration


@pytest.fixture
def dev_queue(dev_member: str) -> Iterator[Any]:
    client = HazelcastClient(cluster_members=[dev_member], cluster_name="dev", cluster_connect_timeout=30)
    yield client.get_queue("dev").blocking()
    client.shutdown()


def arrived(queue: Any, devices: set[str]) -> list[dict[str, Any]]:
    """The queue's items of ``devices``, oldest first. The queue is the session's: other tests leave
    records of other shapes in it (the CoAP source test's raw CoAP records have no device_id)."""
    items = [json.loads(item.to_string() if hasattr(item, "to_string") else item) for item in queue.iterator()]
    return [item for item in items if item.get("device_id") in devices]


def maxes(items: list[dict[str, Any]]) -> list[float]:
    return sorted(item["max"] for item in items)


def test_the_hazelcast_sink_config_moves_aggregates_into_the_dev_queue(
    stack: Any, registry_client: Any, dev_member: str, dev_queue: Any
) -> None:
    values = aggregates(20)
    topic = produce_aggregates(stack, registry_client, "connect.coap_sensor_topic", values)
    mine = {value["device_id"] for value in values}
    placeholders = {"COAP_SENSOR_TOPIC": topic, "HAZELCAST_MEMBERS": dev_member}
    with connect("hazelcast-sink.properties", "FLUXGATE_HZ_", stack, placeholders) as persister:
        persister.start()
        persister.wait_until(lambda: len(arrived(dev_queue, mine)) >= len(values), f"{len(values)} items in dev", 60)
        assert persister.terminate() == 0, persister.log_tail()
    got = arrived(dev_queue, mine)
    assert len(got) == len(values)
    assert maxes(got) == maxes(values)
    assert "running hazelcast-persister" in persister.log_text()
    # As Stream-Reactor's Writer.scala stores them (toJson(record).toString): java.lang.Strings, which
    # this client reads as strs; a Java reader casting to String keeps working.
    strings = [i for i in dev_queue.iterator() if isinstance(i, str) and json.loads(i).get("device_id") in mine]
    assert len(strings) == len(values)


def test_two_tasks_are_two_members_of_the_connectors_group_writing_each_record_once(
    stack: Any, registry_client: Any, dev_member: str, dev_queue: Any, tmp_path: Path
) -> None:
    values = aggregates(40)
    topic = unique_topic("connect.coap_sensor_topic", stack.bootstrap, 3)
    mine = {value["device_id"] for value in values}
    name = f"hazelcast-sink-{uuid.uuid4().hex[:8]}"  # a group of its own: static members outlive the test
    config = with_tasks("hazelcast-sink.properties", tmp_path, 2, connector=name)
    group = f"connect-{name}"
    placeholders = {"COAP_SENSOR_TOPIC": topic, "HAZELCAST_MEMBERS": dev_member}
    with connect(config, "FLUXGATE_HZ_", stack, placeholders, tasks=2) as persister:
        persister.start()
        persister.wait_until(member(persister, 1).ready, "member 1's /readyz", 60)
        # Both hold partitions before any record is there: no rebalance can replay a batch.
        joined = {f"{group}-0", f"{group}-1"}
        persister.wait_until(
            lambda: (held := group_members(stack.bootstrap, group)).keys() == joined and all(held.values()),
            f"{joined} in {group}, each with partitions",
            60,
        )
        produce_to(stack, registry_client, topic, values)
        persister.wait_until(lambda: len(arrived(dev_queue, mine)) >= len(values), f"{len(values)} items in dev", 60)
        assert persister.terminate() == 0, persister.log_tail()
    got = arrived(dev_queue, mine)  # the members have stopped: nothing more comes
    assert len(got) == len(values)
    assert maxes(got) == maxes(values)
    log = persister.log_text()
    assert "hazelcast-persister-0 | " in log and "hazelcast-persister-1 | " in log


# StringConverter values that are not a JSON object. Stream-Reactor's Hazelcast sink never parses the
# text (writers/Writer.scala: toJson(record).toString, a STRING value a Jackson TextNode), so it stores
# each as it stores an object's text: one JSON string.
NOT_OBJECTS = [b"hello, world", b"21.5", b"[1, 2]", b'"quoted"', b"{broken", b'{"device_id": "d1"}']


def test_string_values_that_are_not_json_objects_are_stored_as_text_and_a_tombstone_is_dead_lettered(
    stack: Any, dev_member: str, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topic = unique_topic("connect.text", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.text.deadletter", stack.bootstrap, partitions=1)
    queue, name = f"text-{run}", f"connect-text-{run}"
    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for n, text in enumerate(NOT_OBJECTS[:3]):
        producer.produce(topic, text, f"k{n}".encode(), partition=0)
    producer.produce(topic, None, b"gone", partition=0)  # a tombstone: no text to store
    for n, text in enumerate(NOT_OBJECTS[3:], start=3):
        producer.produce(topic, text, f"k{n}".encode(), partition=0)
    assert producer.flush(30) == 0
    path = tmp_path / f"{name}.properties"
    path.write_text(lines(
        "# A text topic's Hazelcast sink, in the shape of the documents' own",
        f"name={name}",
        "connector.class=com.datamountaineer.streamreactor.connect.hazelcast.sink.HazelCastSinkConnector",
        f"topics={topic}",
        f"connect.hazelcast.sink.cluster.members={dev_member}",
        "connect.hazelcast.sink.group.name=dev",
        f"connect.hazelcast.sink.kcql=INSERT INTO {queue} SELECT * FROM {topic} WITHFORMAT JSON STOREAS QUEUE",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        "errors.tolerance=all",
        f"errors.deadletterqueue.topic.name={dead}",
    ))  # fmt: skip
    client = HazelcastClient(cluster_members=[dev_member], cluster_name="dev", cluster_connect_timeout=30)
    try:
        stored = client.get_queue(queue).blocking()

        def done() -> bool:
            return stored.size() >= len(NOT_OBJECTS) and committed(stack.bootstrap, f"connect-{name}", topic) == 7

        run_until(path, "FLUXGATE_HZ_", stack, done, f"{len(NOT_OBJECTS)} items, a commit past all", 60)
        items = list(stored.iterator())
    finally:
        client.shutdown()
    assert [json.loads(item) for item in items] == [text.decode() for text in NOT_OBJECTS]
    [letter] = consume(stack.bootstrap, dead, expected=1, idle=1.0)
    assert letter.key == b"gone" and letter.header(dlq.SOURCE_OFFSET) == b"3"
    reason = (letter.header(dlq.REASON) or b"").decode()
    assert "null" in reason, reason
