"""A topic the proxy writes that does not exist (the stack's brokers create none on use): the
proxy exits 2 at start naming it, its setting and the command, or creates it when
KAFKA__TOPIC_CREATION__ENABLE says so; one deleted while it runs makes it unready until it is back."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from fluxgate_testing import consume

from fluxgate_core import deadletter
from fluxgate_core.kafka import ensure_topics

pytestmark = pytest.mark.integration
Setup = Any  # the `setup` fixture's type lives in conftest.py, which tests cannot import
EXIT_CONFIG = 2


def absent() -> str:
    return f"test.missing.{uuid.uuid4().hex[:10]}"


def partitions(stack: Any, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    entry = admin.list_topics(topic, timeout=30).topics[topic]
    return 0 if entry.error is not None else len(entry.partitions)


@pytest.mark.parametrize(
    ("variable", "setting"), [("KCQL", "kcql"), ("DEADLETTER_TOPIC", "deadletter_topic")], ids=["target", "deadletter"]
)
def test_a_missing_topic_stops_the_proxy_at_start_naming_it_its_setting_and_the_command(
    setup: Setup, variable: str, setting: str
) -> None:
    topic = absent()
    given = {"KCQL": f"INSERT INTO {topic} SELECT * FROM {setup.prefix}/+/+"} if variable == "KCQL" else {}
    proxy = setup.proxy(**given, **({"DEADLETTER_TOPIC": topic} if variable != "KCQL" else {}))
    proxy.start(wait_ready=False)
    assert proxy.wait(60) == EXIT_CONFIG, proxy.log_tail()
    said = proxy.log_text()
    assert f"{setting} [env FLUXGATE_MQTT_{variable}]: {topic}: no such topic" in said, said
    command = f"kafka-topics.sh --bootstrap-server {setup.stack.bootstrap} --create --topic {topic} --partitions 3"
    assert command in said and "FLUXGATE_MQTT_KAFKA__TOPIC_CREATION__ENABLE=true" in said
    assert partitions(setup.stack, topic) == 0  # nothing created it


def test_asked_to_the_proxy_creates_it_becomes_ready_and_is_unready_while_it_is_deleted(setup: Setup) -> None:
    topic = absent()
    proxy = setup.proxy(
        KCQL=f"INSERT INTO {topic} SELECT * FROM {setup.prefix}/+/+",
        KAFKA__TOPIC_CREATION__ENABLE="true",
        KAFKA__TOPIC_CREATION__PARTITIONS="4",
        KAFKA__TOPIC_CREATION__REPLICATION_FACTOR="1",
    ).start()
    assert partitions(setup.stack, topic) == 4
    assert "kafka.topic.created" in proxy.log_text()

    admin = AdminClient({"bootstrap.servers": setup.stack.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    proxy.wait_until(lambda: not proxy.ready(), "not ready once its topic is deleted", 45)
    assert "kafka.topic.missing" in proxy.log_text() and f"topic={topic}" in proxy.log_text()

    ensure_topics({"bootstrap.servers": setup.stack.bootstrap}, {topic: 4}, replication=1)
    proxy.wait_until(proxy.ready, "ready once the topic is back", 45)
    assert proxy.terminate() == 0, proxy.log_tail()


def test_a_derived_topic_that_does_not_exist_dead_letters_its_messages_or_is_created_when_asked(setup: Setup) -> None:
    """``INSERT INTO $``: the device's topic names the target, met only while running. Missing, its
    messages go to the dead-letter topic with the command that creates it (never held in the
    producer); with KAFKA__TOPIC_CREATION__ENABLE the second proxy creates it and the reading lands."""
    reading = json.dumps({"sensorId": "d1", "temperature": 21.5})
    derived = {"KCQL": f"INSERT INTO $ SELECT * FROM /{setup.prefix}/#", "KCQL_TOPIC_SEPARATOR": "."}
    gone = f"{setup.prefix}.line.gone"
    proxy = setup.proxy(**derived).start()
    setup.publish([(f"/{setup.prefix}/line/gone", reading)], 1)
    (dead,) = consume(setup.stack.bootstrap, setup.deadletters, expected=1, timeout=30)
    assert proxy.terminate() == 0, proxy.log_tail()
    assert dead.header(deadletter.ERROR_CLASS) == b"SubjectRefused"
    assert f"{gone}: no such topic".encode() in (dead.header(deadletter.REASON) or b"")
    assert partitions(setup.stack, gone) == 0

    made = f"{setup.prefix}.line.made"
    proxy = setup.proxy(**derived, KAFKA__TOPIC_CREATION__ENABLE="true", KAFKA__TOPIC_CREATION__PARTITIONS="2").start()
    setup.publish([(f"/{setup.prefix}/line/made", reading)], 1)
    (produced,) = consume(setup.stack.bootstrap, made, expected=1, decoder=setup.decoder, timeout=60)
    assert proxy.terminate() == 0, proxy.log_tail()
    assert produced.record["device_id"] == "d1"  # type: ignore[index]
    assert partitions(setup.stack, made) == 2
