"""The Hazelcast sink of the documents, run by ``fluxgate connect`` unchanged: Avro aggregates on
its topic end up as JSON in the Hazelcast queue ``dev``, read back by a separate client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from connect_runs import aggregates, connect, produce_aggregates
from hazelcast import HazelcastClient

pytestmark = pytest.mark.integration


def test_the_hazelcast_sink_config_moves_aggregates_into_the_dev_queue(
    stack: Any, registry_client: Any, dev_member: str
) -> None:
    values = aggregates(20)
    topic = produce_aggregates(stack, registry_client, "connect.coap_sensor_topic", values)
    mine = {value["device_id"] for value in values}
    client = HazelcastClient(cluster_members=[dev_member], cluster_name="dev", cluster_connect_timeout=30)
    queue = client.get_queue("dev").blocking()

    def arrived() -> list[dict[str, Any]]:
        items = [json.loads(item.to_string() if hasattr(item, "to_string") else item) for item in queue.iterator()]
        return [item for item in items if item["device_id"] in mine]

    placeholders = {"COAP_SENSOR_TOPIC": topic, "HAZELCAST_MEMBERS": dev_member}
    with connect("hazelcast-sink.properties", "FLUXGATE_HZ_", stack, placeholders) as persister:
        persister.start()
        persister.wait_until(lambda: len(arrived()) >= len(values), f"{len(values)} items in the queue dev", 60)
        assert persister.terminate() == 0, persister.log_tail()
    got = sorted(arrived(), key=lambda item: (item["device_id"], item["max"]))
    assert len(got) == len(values)
    assert sorted(item["max"] for item in got) == sorted(value["max"] for value in values)
    assert "running hazelcast-persister" in persister.log_text()
    client.shutdown()
