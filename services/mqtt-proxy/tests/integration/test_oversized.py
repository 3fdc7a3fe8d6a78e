"""No single oversized input stops the proxy (issue 9): a real 2 MiB payload at QoS 1, and a
reading Kafka itself refuses for its size, each against the real Mosquitto and Kafka.

Each must end as a bounded dead letter, acknowledged (a restart on the same persistent
session never receives it again), with the proxy alive and the next reading delivered,
even when that reading shares a producer batch with the refused record.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any

import pytest
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter
from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.limits import DEFAULT_HEAD_BYTES, DEFAULT_MAX_PAYLOAD_BYTES

Setup = Any  # the `setup` fixture's type lives in conftest.py, which tests cannot import
pytestmark = pytest.mark.integration
SMALL_TOPIC_BYTES = 64 * 1024  # max.message.bytes of the topics that refuse a large record


def reading(device: str, seq: int, value: float, **extra: str) -> bytes:
    body = {"sensorId": device, "timestamp": int(time.time() * 1000), "temperature": value, "seq": seq, **extra}
    return json.dumps(body).encode()


def noise(size: int) -> str:
    """Text that lz4 cannot shrink much (the broker checks sizes after compression)."""
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()[:size]


def assert_bounded(letter: ConsumedRecord, payload: bytes, source: str, error_class: bytes) -> None:
    """The dead letter keeps the payload's head and says what the whole was."""
    assert letter.value == payload[:DEFAULT_HEAD_BYTES]
    assert letter.header(deadletter.TRUNCATED) == b"true"
    assert letter.header(deadletter.PAYLOAD_SIZE) == str(len(payload)).encode()
    assert letter.header(deadletter.PAYLOAD_SHA256) == hashlib.sha256(payload).hexdigest().encode()
    assert letter.header(deadletter.SOURCE) == source.encode()
    assert letter.header(deadletter.SERVICE) == b"mqtt-proxy"
    assert letter.header(deadletter.ERROR_CLASS) == error_class
    assert letter.header(deadletter.REASON) and letter.header(deadletter.BOUNDED_BECAUSE)


def sequences(setup: Setup, until: int) -> list[int]:
    """The readings' sequence numbers in Kafka, read until ``until`` arrived. Every reading
    here is device d1's, so one partition in order: nothing earlier can still be missing."""

    def arrived(got: list[ConsumedRecord]) -> bool:
        return until in [item.record["sequence"] for item in got if item.record]

    got = consume(setup.stack.bootstrap, setup.readings, decoder=setup.decoder, complete=arrived, idle=0, timeout=30)
    return [item.record["sequence"] for item in got if item.record]


def dead_letters(setup: Setup, expected: int) -> list[ConsumedRecord]:
    # idle=0: that none came twice is for assert_never_received_again to prove, not a timer.
    return consume(setup.stack.bootstrap, setup.deadletters, expected=expected, idle=0, timeout=30)


def assert_never_received_again(setup: Setup, client_id: str, topic: str) -> None:
    """Restart on the same session and publish a marker behind anything it still holds: the
    broker redelivers an unacknowledged message before newer ones of the same topic, so once
    the marker is in Kafka, a proxy that received nothing else was never given the old one."""
    proxy = setup.proxy(client_id, QOS="1").start()
    setup.publish([(topic, reading("d1", 99, 9.5).decode())], 1)
    assert sequences(setup, until=99) == [1, 2, 99]
    assert proxy.metric("fluxgate_mqtt_messages_total") == 1
    assert proxy.terminate() == 0


def test_oversized_inputs_are_dead_lettered_bounded_acknowledged_and_never_received_again(setup: Setup) -> None:
    # Both topics refuse records over 64 KiB: a 200 KiB payload (under the proxy's limit) makes
    # a reading Kafka refuses, and then a whole dead letter Kafka refuses too.
    small = {"max.message.bytes": str(SMALL_TOPIC_BYTES)}
    setup.readings = unique_topic("test.readings.small", setup.stack.bootstrap, config=small)
    setup.deadletters = unique_topic("test.deadletter.small", setup.stack.bootstrap, config=small)
    client_id, topic = f"oversized-{setup.prefix}", f"{setup.prefix}/d1/temperature"
    # A long linger puts each oversized message's record in one batch with the next reading's.
    proxy = setup.proxy(client_id, QOS="1", KAFKA__LINGER_MS="100").start()
    over_limit = reading("d1", 0, 20.0, note=noise(2 * 1024 * 1024))[: 2 * 1024 * 1024]
    refused = reading("d1", 0, 20.0, note=noise(200 * 1024))  # a string field: an attribute of the record
    assert SMALL_TOPIC_BYTES < len(refused) < DEFAULT_MAX_PAYLOAD_BYTES
    # One connection, back to back (payloads are single lines).
    setup.publish([(topic, over_limit.decode()), (topic, reading("d1", 1, 21.0).decode()),
                   (topic, refused.decode()), (topic, reading("d1", 2, 22.0).decode())], 1)  # fmt: skip
    dead = dead_letters(setup, expected=2)  # keyed by the device: one partition, in order
    assert len(dead) == 2, f"a reading went with them: {[letter.header(deadletter.REASON) for letter in dead]}"
    first, second = dead
    assert_bounded(first, over_limit, topic, b"PayloadTooLarge")
    assert f"over the limit of {DEFAULT_MAX_PAYLOAD_BYTES} bytes".encode() in first.header(deadletter.REASON)
    assert_bounded(second, refused, topic, b"DeliveryError")
    assert b"too large" in second.header(deadletter.REASON).lower()
    assert b"whole dead letter was refused" in second.header(deadletter.BOUNDED_BECAUSE)
    assert sequences(setup, until=2) == [1, 2]
    assert proxy.terminate() == 0  # alive until asked, then a clean drain
    assert_never_received_again(setup, client_id, topic)
