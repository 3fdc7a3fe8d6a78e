"""coap-ingest with a topic that does not exist (the stack's brokers create none on use): it
exits 2 at start naming the topic, ``resources`` or ``deadletter_topic`` and the command that
creates it, never "ready" with readings waiting in the producer; or, asked, it creates it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from fluxgate_testing import ServiceProcess, free_port

pytestmark = pytest.mark.integration
Start = Callable[..., ServiceProcess]


def absent() -> str:
    return f"test.coap.missing.{uuid.uuid4().hex[:10]}"


def test_a_missing_resource_topic_stops_the_start_naming_it_resources_and_the_command(
    stack: Any, start_ingest: Start
) -> None:
    topic = absent()
    ingest = start_ingest([{"uri": f"coap://127.0.0.1:{free_port()}/t", "topic": topic}])
    assert ingest.wait(60) == 2, ingest.log_tail()
    said = ingest.log_text()
    assert f"resources [env FLUXGATE_COAP_RESOURCES]: {topic}: no such topic" in said, said
    assert f"kafka-topics.sh --bootstrap-server {stack.bootstrap} --create --topic {topic} --partitions 3" in said


def test_a_missing_deadletter_topic_is_created_when_asked(stack: Any, start_ingest: Start) -> None:
    topic = absent()
    refused = start_ingest([], DEADLETTER_TOPIC=topic)
    assert refused.wait(60) == 2, refused.log_tail()
    assert f"deadletter_topic [env FLUXGATE_COAP_DEADLETTER_TOPIC]: {topic}: no such topic" in refused.log_text()
    creation = {"KAFKA__TOPIC_CREATION__ENABLE": "true", "KAFKA__TOPIC_CREATION__PARTITIONS": "1"}
    ingest = start_ingest([], DEADLETTER_TOPIC=topic, **creation)
    ingest.wait_ready()  # no resources: ready once the producer is up and its topics are there
    metadata = AdminClient({"bootstrap.servers": stack.bootstrap}).list_topics(topic, timeout=30)
    assert len(metadata.topics[topic].partitions) == 1
    assert ingest.terminate() == 0, ingest.log_tail()
