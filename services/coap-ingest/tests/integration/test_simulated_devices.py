"""coap-ingest observing the simulator's CoAP devices: exact readings, dead letters, SIGTERM."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import cbor2
import pytest
from coap_payloads import T0, reading_json
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter
from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.serde import AvroDecoder
from fluxgate_sim.coap import CoapDeviceServer

pytestmark = pytest.mark.integration


def ms(value: datetime) -> int:
    return round(value.timestamp() * 1000)


async def consume_async(bootstrap: str, topic: str, **kwargs: Any) -> list[ConsumedRecord]:
    # consume() blocks; the CoAP server under test lives on this event loop and must keep serving.
    return await asyncio.to_thread(consume, bootstrap, topic, **kwargs)


async def test_notifications_arrive_in_kafka_exactly(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    readings_topic, _ = topics
    async with CoapDeviceServer(port=0) as server:
        server.publish("dev-a", "temperature", reading_json("dev-a", "temperature", 20.5, T0))
        senml = cbor2.dumps([{-2: "dev-b:", 0: "humidity", 1: "%RH", 2: 41.5, 6: (T0 + 1) / 1000}])
        server.publish("dev-b", "humidity", senml, content_format=112)
        ingest = start_ingest(server.resources_config(), READINESS="all")
        await asyncio.to_thread(ingest.wait_ready)
        for step in range(1, 4):
            server.publish("dev-a", "temperature", reading_json("dev-a", "temperature", 20.5 + step, T0 + step * 1000))
            await asyncio.sleep(0.05)  # pacing only: observe coalesces updates made in one instant
        records = await consume_async(stack.bootstrap, readings_topic, expected=5, decoder=decoder, timeout=30)
        assert ingest.terminate() == 0
    by_device = sorted(((c.key, c.record) for c in records), key=lambda kv: (kv[0], ms(kv[1]["event_time"])))
    assert [(key, r["metric"], r["value"], ms(r["event_time"])) for key, r in by_device] == [
        (b"dev-a", "temperature", 20.5, T0),
        (b"dev-a", "temperature", 21.5, T0 + 1000),
        (b"dev-a", "temperature", 22.5, T0 + 2000),
        (b"dev-a", "temperature", 23.5, T0 + 3000),
        (b"dev-b", "humidity", 41.5, T0 + 1),
    ]
    first = by_device[0][1]
    assert first["source"] == server.uri("dev-a", "temperature")
    assert first["source_protocol"] == "COAP"
    assert first["unit"] == "Cel"
    assert first["sequence"] is None  # the payload has no seq (the observe number is no reading's identity)
    assert first["ingest_time"] >= datetime.now(UTC).replace(year=2024)


async def test_resources_across_two_servers(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    readings_topic, _ = topics
    async with CoapDeviceServer(port=0) as first, CoapDeviceServer(port=0) as second:
        first.publish("dev-1", "temperature", reading_json("dev-1", "temperature", 11.5, T0))
        second.publish("dev-2", "brightness", reading_json("dev-2", "brightness", 250.0, T0))
        ingest = start_ingest([*first.resources_config(), *second.resources_config()], READINESS="all")
        await asyncio.to_thread(ingest.wait_ready)
        first.publish("dev-1", "temperature", reading_json("dev-1", "temperature", 12.5, T0 + 1000))
        second.publish("dev-2", "brightness", reading_json("dev-2", "brightness", 260.0, T0 + 1000))
        records = await consume_async(stack.bootstrap, readings_topic, expected=4, decoder=decoder, timeout=30)
        assert ingest.terminate() == 0
    got = sorted((c.record["source"], c.record["value"]) for c in records if c.record)
    assert got == sorted(
        [
            (first.uri("dev-1", "temperature"), 11.5),
            (first.uri("dev-1", "temperature"), 12.5),
            (second.uri("dev-2", "brightness"), 250.0),
            (second.uri("dev-2", "brightness"), 260.0),
        ]
    )


async def test_malformed_payload_goes_to_the_dead_letter_topic(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    readings_topic, dead_letter_topic = topics
    broken = b'{"sensorId": "dev-m", "temperature": '
    async with CoapDeviceServer(port=0) as server:
        server.publish("dev-m", "temperature", reading_json("dev-m", "temperature", 19.0, T0))
        ingest = start_ingest(server.resources_config())
        await asyncio.to_thread(ingest.wait_ready)
        server.publish("dev-m", "temperature", broken)
        await asyncio.sleep(0.05)
        server.publish("dev-m", "temperature", reading_json("dev-m", "temperature", 19.5, T0 + 1000))
        dead = await consume_async(stack.bootstrap, dead_letter_topic, expected=1, timeout=30)
        good = await consume_async(stack.bootstrap, readings_topic, expected=2, decoder=decoder, timeout=30)
        assert ingest.terminate() == 0
    assert len(dead) == 1
    assert dead[0].value == broken
    assert b"not valid JSON" in dead[0].header(deadletter.REASON)
    assert dead[0].header(deadletter.ERROR_CLASS) == b"PayloadError"
    assert dead[0].header(deadletter.SOURCE) == server.uri("dev-m", "temperature").encode()
    assert dead[0].header(deadletter.SERVICE) == b"coap-ingest"
    assert dead[0].header("coap.content-format") == b"50"
    assert sorted(c.record["value"] for c in good if c.record) == [19.0, 19.5]


async def test_what_kafka_refuses_for_good_is_dead_lettered_and_what_nothing_takes_stops_the_service(
    stack: Any, topics: tuple[str, str], start_ingest: Callable[..., Any]
) -> None:
    _, dead_letter_topic = topics
    # Smaller than any record batch: the broker refuses every record, for good (not retriable).
    refusing = unique_topic("test.coap.refusing", stack.bootstrap, config={"max.message.bytes": "64"})
    payload = reading_json("dev-r", "temperature", 17.25, T0)
    async with CoapDeviceServer(port=0) as server:
        server.publish("dev-r", "temperature", payload)
        resources = [{**resource, "topic": refusing} for resource in server.resources_config()]
        ingest = start_ingest(resources)
        dead = await consume_async(stack.bootstrap, dead_letter_topic, expected=1, timeout=30)
        assert ingest.process.poll() is None, ingest.log_text()
        assert await asyncio.to_thread(ingest.terminate) == 0
        stuck = start_ingest(resources, DEADLETTER_TOPIC=refusing)
        assert await asyncio.to_thread(stuck.process.wait, 60) == 1
    assert [letter.value for letter in dead] == [payload]
    assert dead[0].header(deadletter.ERROR_CLASS) == b"DeliveryError"
    assert b"too large" in dead[0].header(deadletter.REASON).lower()
    assert "notification.not_delivered" in stuck.log_text() and "Message size too large" in stuck.log_text()


async def test_sigterm_drains_and_exits_zero(start_ingest: Callable[..., Any]) -> None:
    async with CoapDeviceServer(port=0) as server:
        server.publish("dev-s", "temperature", reading_json("dev-s", "temperature", 18.0, T0))
        ingest = start_ingest(server.resources_config())
        await asyncio.to_thread(ingest.wait_ready)
        assert ingest.metric("fluxgate_coap_observations_active", host="127.0.0.1") == 1.0
        assert await asyncio.to_thread(ingest.terminate) == 0
    log = ingest.log_text()
    assert "shutdown.draining" in log and "service.stopped" in log


def test_bad_configuration_exits_two_naming_the_variable(start_ingest: Callable[..., Any]) -> None:
    ingest = start_ingest([{"uri": "http://127.0.0.1/sensors/x"}])
    assert ingest.process.wait(30) == 2
    assert "FLUXGATE_COAP_RESOURCES" in ingest.log_text()
    assert "scheme must be one of" in ingest.log_text()


async def test_two_members_observe_every_resource_once(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    """Two replicas of one configuration (a StatefulSet's pods 0 and 1): each resource's
    current state arrives once, from the one member that observes it."""
    readings_topic, _ = topics
    async with CoapDeviceServer(port=0) as server:
        devices = [f"dev-{n}" for n in range(5)]
        for n, device in enumerate(devices):
            server.publish(device, "temperature", reading_json(device, "temperature", 20.0 + n, T0 + n))
        members = [start_ingest(server.resources_config(), MEMBERS="2", MEMBER=str(m)) for m in (0, 1)]
        for member in members:
            await asyncio.to_thread(member.wait_ready)
        records = await consume_async(
            stack.bootstrap, readings_topic, expected=len(devices), decoder=decoder, timeout=30, idle=3.0
        )
        assert [member.terminate() for member in members] == [0, 0]
    assert sorted(c.key for c in records) == sorted(device.encode() for device in devices)  # each once
