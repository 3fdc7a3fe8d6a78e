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
from connect_fixtures import with_tasks
from connect_runs import aggregates, connect, group_members, member, produce_aggregates, produce_to
from fluxgate_testing import unique_topic
from hazelcast import HazelcastClient

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
