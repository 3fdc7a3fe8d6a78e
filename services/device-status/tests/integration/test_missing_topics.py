"""device-status with a topic that does not exist (the stack's brokers create none on use):
exit 2 naming it, its setting and the command, or created with KAFKA__TOPIC_CREATION__ENABLE;
deleted while the service runs, /readyz answers 503 (``topics_present``) until it is back."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from fluxgate_core.kafka import ensure_topics

pytestmark = pytest.mark.integration
Fleet = Any  # the `fleet` fixture's type lives in conftest.py, which tests cannot import


def test_a_missing_input_topic_stops_the_start_naming_it_and_the_command(fleet: Fleet) -> None:
    topic = f"sensors.readings.missing.{uuid.uuid4().hex[:10]}"
    with fleet.service(STATUS__INPUT_TOPIC=topic) as service:
        service.start(wait_ready=False)
        code = service.wait(60)
    line = service.log_text().splitlines()[-1]
    assert code == 2, service.log_text()
    assert f"status.input_topic [env FLUXGATE_STATUS_STATUS__INPUT_TOPIC]: {topic}: no such topic" in line
    assert f"kafka-topics.sh --bootstrap-server {fleet.bootstrap} --create --topic {topic} --partitions 3" in line


def test_asked_it_creates_the_status_topic_and_is_unready_while_it_is_deleted(fleet: Fleet) -> None:
    topic = f"devices.status.missing.{uuid.uuid4().hex[:10]}"
    creation = {"KAFKA__TOPIC_CREATION__ENABLE": "true", "KAFKA__TOPIC_CREATION__PARTITIONS": "2"}
    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    with fleet.service(STATUS__STATUS_TOPIC=topic, **creation) as service:
        service.start(timeout=90)
        assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 2
        admin.delete_topics([topic])[topic].result(30)
        service.wait_until(lambda: not service.ready(), "not ready once the status topic is deleted", 45)
        assert json.loads(service.get("/readyz")[1])["checks"]["topics_present"] is False
        ensure_topics({"bootstrap.servers": fleet.bootstrap}, {topic: 2}, replication=1)
        service.wait_until(service.ready, "ready once it is back", 45)
        assert service.terminate() == 0, service.log_tail()
