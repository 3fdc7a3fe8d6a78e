"""`soak_check.records`, the read every end-of-run check makes of a topic, against the real
Kafka: a transactional partition (whose last offset is a commit marker, never handed out), a
plain one and an empty one are each read to the end they had when the read began, and what
is written after that is not part of it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from fluxgate_testing import unique_topic
from soak_check import records

pytestmark = pytest.mark.integration


def test_each_partition_is_read_to_its_end_when_the_read_began_transactional_or_not(stack: Any) -> None:
    topic = unique_topic("check.records", stack.bootstrap, partitions=3)
    transactional = Producer({"bootstrap.servers": stack.bootstrap, "transactional.id": f"check-{uuid.uuid4().hex}"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    for i in range(5):
        transactional.produce(topic, value=f"t{i}".encode(), partition=0)
    transactional.commit_transaction(30)
    plain = Producer({"bootstrap.servers": stack.bootstrap})
    for i in range(3):
        plain.produce(topic, value=f"p{i}".encode(), partition=1)
    assert plain.flush(10) == 0

    read = records(stack.bootstrap, topic)
    first = next(read)  # the ends are taken here: what is written from now on is not read
    for i in range(4):
        plain.produce(topic, value=f"after{i}".encode(), partition=i % 2)
    assert plain.flush(10) == 0
    got = [first, *read]

    assert sorted(m.value() for m in got) == sorted([*(f"t{i}".encode() for i in range(5)), b"p0", b"p1", b"p2"])
    assert {m.partition() for m in got} == {0, 1}
