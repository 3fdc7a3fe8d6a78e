"""fluxgate-core's Kafka side against the real broker and registry: produce, decode, commit."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fluxgate_testing import unique_topic

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import SerializationError
from fluxgate_core.kafka import RecordConsumer, make_producer
from fluxgate_core.schemas import SENSOR_READING, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder
from fluxgate_core.settings import KafkaSettings
from fluxgate_stack import kill, start

pytestmark = pytest.mark.integration

READING = {
    "device_id": "d0",
    "metric": "temperature",
    "value": 0.0,
    "unit": "Cel",
    "event_time": 1_700_000_000_000,
    "ingest_time": 1_700_000_000_123,
    "source_protocol": "MQTT",
    "source": "sensors/d0/temperature",
    "sequence": None,
    "attributes": {},
}


def read(consumer: RecordConsumer, count: int, timeout: float = 30.0) -> list[ConsumedRecord]:
    got: list[ConsumedRecord] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got.extend(consumer.poll_batch(timeout=0.5))
    return got


async def test_records_come_back_decoded_poison_flagged_and_commits_resume_the_group(
    stack: Any, registry_client: Any
) -> None:
    topic = unique_topic("test.core", stack.bootstrap, partitions=2)
    settings = KafkaSettings.model_validate({"bootstrap_servers": stack.bootstrap})
    encoder = AvroEncoder.registered(registry_client, topic, schema_text(SENSOR_READING), schema_dict(SENSOR_READING))
    poison = [b"plain text, no wire header", encoder.encode(READING)[:7]]
    producer = make_producer(settings.producer_config("core-test"))
    await producer.start()
    try:
        for i in range(20):
            value = encoder.encode({**READING, "device_id": f"d{i}", "value": i + 0.25, "sequence": i})
            await producer.deliver(topic, value, key=f"d{i}", headers=[("trace", f"t{i}")])
        for value in poison:
            await producer.deliver(topic, value, key=b"poison")
    finally:
        await producer.stop()

    group = f"core-{uuid.uuid4().hex[:8]}"
    decoder = AvroDecoder(registry_client, schema_dict(SENSOR_READING))
    first = RecordConsumer(settings.consumer_config(group, "core-test"), [topic], decoder)
    got = read(first, 22)
    good = [item for item in got if item.error is None]
    assert sorted((r.record["sequence"], r.record["value"]) for r in good) == [(i, i + 0.25) for i in range(20)]  # type: ignore[index]
    for item in good:
        assert item.key == item.record["device_id"].encode()  # type: ignore[index]
        assert item.headers == (("trace", f"t{item.record['sequence']}".encode()),)  # type: ignore[index]
    bad = [item for item in got if item.error is not None]
    assert sorted(item.value for item in bad) == sorted(poison)
    assert all(isinstance(item.error, SerializationError) and item.record is None for item in bad)
    assert {item.source for item in bad} <= {f"{topic}/{p}/{o}" for p in (0, 1) for o in range(22)}

    handled = [item for item in got if item.offset < 4]  # the first four of each partition
    with pytest.raises(ValueError, match="skip records"):  # a gap: offset 1 was never handled
        first.commit([item for item in handled if item.offset != 1])
    first.commit(handled)
    first.close()
    first.close()  # safe twice

    second = RecordConsumer(settings.consumer_config(group, "core-test"), [topic], decoder)
    try:
        rest = read(second, len(got) - len(handled))
        rest.extend(second.poll_batch(timeout=2.0))  # nothing more: committed records are not read again
    finally:
        second.close()
    assert sorted(item.source for item in rest) == sorted(item.source for item in got if item.offset >= 4)


@pytest.mark.serial(kills="kafka")
async def test_an_idle_producer_is_unhealthy_while_kafka_is_down_and_healthy_once_it_is_back(stack: Any) -> None:
    settings = KafkaSettings.model_validate({"bootstrap_servers": stack.bootstrap})
    producer = make_producer(settings.producer_config("core-health-test"))
    await producer.start()
    try:
        assert producer.healthy()
        kill("kafka")
        try:
            await wait_for(lambda: not producer.healthy(), "the producer to see every broker down")
            for _ in range(8):  # and it stays so: librdkafka's later transport errors do not hide it
                await asyncio.sleep(0.5)
                assert not await asyncio.to_thread(producer.healthy)
        finally:
            start("kafka")
        # Nothing is produced: only the health check itself may notice that Kafka is back.
        await wait_for(producer.healthy, "the producer to be healthy again without producing")
    finally:
        await producer.stop()


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(condition):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)
