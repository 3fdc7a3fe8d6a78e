"""The message handler driven by gmqtt's real packet handler (``optimistic_acknowledgement=False``).

PUBLISH packets are fed to gmqtt's ``MqttPackageHandler``; the acknowledgements it
writes are recorded, so these tests check when and in which order gmqtt really acks.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from gmqtt.mqtt.constants import MQTTCommands, MQTTv311
from gmqtt.mqtt.handler import MqttPackageHandler
from gmqtt.mqtt.package import Package
from gmqtt.mqtt.utils import ConnectionState

from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import DeliveryError
from fluxgate_core.gateway import SubjectRefused
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder
from fluxgate_mqtt_proxy.acks import AckSequencer, quiet_unacknowledged
from fluxgate_mqtt_proxy.client import SocketValve, route_publishes
from fluxgate_mqtt_proxy.convert import MessageConverter
from fluxgate_mqtt_proxy.handler import MessageHandler
from fluxgate_mqtt_proxy.kcql import routes_from_kcql
from fluxgate_mqtt_proxy.route_settings import RouteSettings, default_routes

GOOD = json.dumps({"sensorId": "d1", "temperature": 21.5}).encode()


@dataclass
class FakeProducer:
    """Records what is produced; each record's Kafka acknowledgement is resolved by the test."""

    sent: list[tuple[str, bytes, Any, Any]] = field(default_factory=list)
    pending: list[asyncio.Future[None]] = field(default_factory=list)
    auto_confirm_topics: set[str] = field(default_factory=set)

    async def send(self, topic: str, value: bytes, *, key: Any = None, headers: Any = None) -> asyncio.Future[None]:
        self.sent.append((topic, value, key, list(headers or ())))
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if topic in self.auto_confirm_topics:
            future.set_result(None)
        else:
            self.pending.append(future)
        return future

    async def send_many(self, records: Sequence[KafkaRecord]) -> asyncio.Future[list[BaseException | None]]:
        """The batch face of the same per-record futures: one answer per record, once all are in."""
        futures = [await self.send(r.topic, r.value, key=r.key, headers=r.headers) for r in records]
        return asyncio.ensure_future(_answers(futures))

    async def deliver(self, topic: str, value: bytes, *, key: Any = None, headers: Any = None) -> None:
        await (await self.send(topic, value, key=key, headers=headers))

    def confirm(self, index: int) -> None:
        self.pending[index].set_result(None)

    def reject(self, index: int, *, retriable: bool) -> None:
        self.pending[index].set_exception(DeliveryError("Kafka rejected record: too large", retriable=retriable))


async def _answers(futures: Sequence[asyncio.Future[None]]) -> list[BaseException | None]:
    answers = await asyncio.gather(*futures, return_exceptions=True)
    return [answer if isinstance(answer, BaseException) else None for answer in answers]


class Harness:
    """Our handler behind gmqtt's package handler, with the acknowledgements it writes."""

    def __init__(self, converter: MessageConverter | None = None) -> None:
        self.producer = FakeProducer(auto_confirm_topics={"dlq"})
        self.acks: list[tuple[int, int, int]] = []  # (command, mid, reason code)
        self.fatal: list[BaseException] = []
        self.sequencer = AckSequencer()
        self.valve = SocketValve(client=object(), high=100)
        converter = converter or MessageConverter(
            default_routes(), AvroEncoder(schema_dict(SENSOR_READING), schema_id=1)
        )
        dead_letters = DeadLetterWriter(self.producer, "dlq", "mqtt-proxy")
        self.handler = MessageHandler(
            converter,
            self.producer,
            dead_letters,
            self.valve,
            self.sequencer,
            self.fatal.append,
        )
        self.gmqtt = MqttPackageHandler(
            connack_event=asyncio.Event(), connection_lost_event=asyncio.Event(),
            connection_state=ConnectionState(), reconnect_callback=_noop, disconnect_callback=_noop,
            resend_qos_callback=_noop, clear_qos_callback=lambda: None, connect_properties={},
            subscriptions_getter=list, remove_message_callback=lambda mid: None,
            store_message_callback=lambda mid, raw: None, send_command_with_mid_callback=self._ack,
            optimistic_acknowledgement=False,
        )  # fmt: skip
        # What the service does with its client's packet handler.
        route_publishes(self.gmqtt, self.handler)

    def _ack(self, cmd: int, mid: int, dup: bool, reason_code: int = 0) -> None:
        self.acks.append((cmd, mid, reason_code))

    def publish(self, topic: str, payload: bytes, qos: int, mid: int, user_properties: Mapping[str, str] = {}) -> None:
        name = topic.encode()
        props = b"".join(b"\x26" + _utf8(k) + _utf8(v) for k, v in user_properties.items())
        body = struct.pack("!H", len(name)) + name + (struct.pack("!H", mid) if qos else b"")
        body += bytes([len(props)]) + props + payload
        self.gmqtt._handle_packet(MQTTCommands.PUBLISH | (qos << 1), body)


async def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _utf8(text: str) -> bytes:
    return struct.pack("!H", len(text.encode())) + text.encode()


async def settle() -> None:
    """Let every runnable task and callback run (no timing involved)."""
    for _ in range(50):
        await asyncio.sleep(0)


PUBACK, PUBREC = int(MQTTCommands.PUBACK), int(MQTTCommands.PUBREC)


@pytest.fixture
async def harness() -> Harness:
    quiet_unacknowledged(asyncio.get_running_loop())
    return Harness()


@pytest.mark.parametrize(("qos", "command"), [(1, PUBACK), (2, PUBREC)])
async def test_acknowledged_only_after_kafka_confirmed(harness: Harness, qos: int, command: int) -> None:
    harness.publish("sensors/d1/temperature", GOOD, qos=qos, mid=7)
    await settle()
    assert len(harness.producer.sent) == 1
    assert harness.acks == []  # Kafka has not confirmed yet
    harness.producer.confirm(0)
    await settle()
    assert harness.acks == [(command, 7, 0)]


async def test_acknowledgements_keep_arrival_order_when_kafka_confirms_out_of_order(harness: Harness) -> None:
    for mid in (1, 2, 3):
        harness.publish(f"sensors/d{mid}/temperature", GOOD, qos=1, mid=mid)
    await settle()
    harness.producer.confirm(2)
    harness.producer.confirm(1)
    await settle()
    assert harness.acks == []  # message 1 is still waiting for Kafka
    harness.producer.confirm(0)
    await settle()
    assert [mid for _, mid, _ in harness.acks] == [1, 2, 3]


async def test_a_batch_of_mixed_qos_is_acknowledged_in_arrival_order_once_all_of_it_is_in_kafka(
    harness: Harness,
) -> None:
    harness.publish("sensors/d1/temperature", GOOD, qos=1, mid=31)
    harness.publish("sensors/d2/temperature", GOOD, qos=2, mid=32)
    harness.publish("sensors/d3/temperature", GOOD, qos=0, mid=0)
    harness.publish("sensors/d4/temperature", b"not json", qos=1, mid=34)  # dead-lettered, then acknowledged
    harness.publish("sensors/d5/temperature", GOOD, qos=1, mid=35)
    await settle()
    sources = [dict(headers)["mqtt.topic"] for *_, headers in harness.producer.sent]
    assert sources == [f"sensors/d{n}/temperature".encode() for n in (1, 2, 3, 5)]  # in arrival order
    for index in (3, 1, 0):
        harness.producer.confirm(index)
    await settle()
    assert harness.acks == []  # one record of the batch is still not confirmed
    harness.producer.confirm(2)
    await settle()
    assert [topic for topic, *_ in harness.producer.sent][4:] == ["dlq"]
    assert harness.acks == [(PUBACK, 31, 0), (PUBREC, 32, 0), (PUBACK, 34, 0), (PUBACK, 35, 0)]
    assert harness.fatal == []


async def test_all_records_of_a_message_are_confirmed_before_its_ack(harness: Harness) -> None:
    pack = json.dumps([{"bn": "d9:", "n": "temperature", "v": 20.0}, {"n": "humidity", "v": 40.0}]).encode()
    harness.publish("devices/d9/senml", pack, qos=1, mid=4)
    await settle()
    assert len(harness.producer.pending) == 2
    harness.producer.confirm(0)
    await settle()
    assert harness.acks == []
    harness.producer.confirm(1)
    await settle()
    assert harness.acks == [(PUBACK, 4, 0)]


async def test_malformed_payload_is_dead_lettered_with_original_bytes_then_acknowledged(harness: Harness) -> None:
    harness.publish("sensors/d1/temperature", b"\xff{garbage", qos=1, mid=5, user_properties={"site": "lab"})
    await settle()
    ((topic, value, key, headers),) = harness.producer.sent
    assert (topic, value, key) == ("dlq", b"\xff{garbage", "d1")
    header = dict(headers)
    assert header["fluxgate.dlq.error.class"] == b"PayloadError"
    assert b"not UTF-8" in header["fluxgate.dlq.reason"]
    assert header["mqtt.topic"] == b"sensors/d1/temperature"
    assert header["mqtt.user.site"] == b"lab"
    assert harness.acks == [(PUBACK, 5, 0)]
    assert harness.fatal == []


async def test_a_device_cannot_forge_the_dead_letter_headers_a_replay_reads(harness: Harness) -> None:
    # A bad payload with our reserved names as user properties: an operator's replay reads
    # fluxgate.dlq.topic as where to write, so a device must never be the one to set it.
    forged = {"fluxgate.dlq.topic": "temperatures.aggregated", "fluxgate.dlq.reason": "fine", "fluxgate.x": "1"}
    harness.publish("sensors/d1/temperature", b"not json", qos=1, mid=8, user_properties=forged)
    await settle()
    ((topic, _, _, headers),) = harness.producer.sent
    assert topic == "dlq"
    names = [name for name, _ in headers]
    assert "fluxgate.dlq.topic" not in names and "fluxgate.x" not in names
    assert names.count("fluxgate.dlq.reason") == 1 and dict(headers)["fluxgate.dlq.reason"] != b"fine"
    assert dict(headers)["mqtt.user.fluxgate.dlq.topic"] == b"temperatures.aggregated"  # kept, as the device's
    assert harness.acks == [(PUBACK, 8, 0)]


async def test_a_message_that_multiplies_past_the_output_limit_is_dead_lettered_with_why(harness: Harness) -> None:
    payload = json.dumps({"sensorId": "d1", "note": "x" * 50_000, **{f"m{i}": i for i in range(100)}}).encode()
    harness.publish("sensors/d1/temperature", payload, qos=1, mid=9)
    await settle()
    ((topic, value, _, headers),) = harness.producer.sent  # nothing of it went to the readings
    assert (topic, value) == ("dlq", payload)
    assert dict(headers)["fluxgate.dlq.error.class"] == b"OutputTooLarge"
    assert b"over the limit of 1048576 bytes" in dict(headers)["fluxgate.dlq.reason"]
    assert harness.acks == [(PUBACK, 9, 0)] and harness.fatal == []


def _registered_unless_aggregated(topics: Any) -> dict[str, AvroEncoder | SubjectRefused]:
    """Like the registry: the aggregates' subject holds another record type, so SensorReading is refused there."""
    encoder = AvroEncoder(schema_dict(SENSOR_READING), schema_id=2)
    refusal = SubjectRefused("registry refused schema for subject 'temperatures.aggregated-value': Incompatible")
    return {name: refusal if name == "temperatures.aggregated" else encoder for name in topics}


async def test_a_subject_the_registry_refuses_is_dead_lettered_and_the_proxy_goes_on() -> None:
    quiet_unacknowledged(asyncio.get_running_loop())
    routes = routes_from_kcql("INSERT INTO $ SELECT * FROM /#", topic_separator=".")
    harness = Harness(MessageConverter(routes, {}, register=_registered_unless_aggregated))
    harness.producer.auto_confirm_topics.add("plant.a")
    harness.publish("/temperatures/aggregated", GOOD, qos=1, mid=1)
    harness.publish("/plant/a", GOOD, qos=1, mid=2)
    await settle()
    assert [topic for topic, *_ in harness.producer.sent] == ["plant.a", "dlq"]
    headers = dict(harness.producer.sent[1][3])
    assert headers["fluxgate.dlq.error.class"] == b"SubjectRefused"
    assert b"'temperatures.aggregated-value'" in headers["fluxgate.dlq.reason"]
    assert harness.acks == [(PUBACK, 1, 0), (PUBACK, 2, 0)] and harness.fatal == []


async def test_record_kafka_will_never_take_is_dead_lettered(harness: Harness) -> None:
    harness.publish("sensors/d1/temperature", GOOD, qos=1, mid=6)
    await settle()
    harness.producer.reject(0, retriable=False)
    await settle()
    assert [topic for topic, *_ in harness.producer.sent] == ["sensors.readings", "dlq"]
    assert harness.acks == [(PUBACK, 6, 0)]


async def test_kafka_failure_leaves_the_message_unacknowledged_and_stops_the_proxy(harness: Harness) -> None:
    harness.publish("sensors/d1/temperature", GOOD, qos=1, mid=8)
    harness.publish("sensors/d2/temperature", GOOD, qos=1, mid=9)
    await settle()
    harness.producer.reject(0, retriable=True)
    harness.producer.confirm(1)
    await settle()
    assert [mid for _, mid, _ in harness.acks] == [9]  # 8 is redelivered by the broker
    assert len(harness.fatal) == 1 and isinstance(harness.fatal[0], DeliveryError)


async def test_message_from_a_lost_connection_is_not_acknowledged_on_the_next(harness: Harness) -> None:
    harness.publish("sensors/d1/temperature", GOOD, qos=1, mid=10)
    await settle()
    harness.sequencer.new_connection()  # what on_disconnect / on_connect do
    harness.producer.confirm(0)
    harness.publish("sensors/d2/temperature", GOOD, qos=1, mid=10)  # the broker's redelivery, same packet id
    await settle()
    harness.producer.confirm(1)
    await settle()
    assert harness.acks == [(PUBACK, 10, 0)]
    assert len(harness.producer.sent) == 2  # both reached Kafka: a duplicate, never a loss


async def test_qos0_waits_for_kafka_but_sends_nothing(harness: Harness) -> None:
    harness.publish("sensors/d1/temperature", GOOD, qos=0, mid=0)
    await settle()
    assert harness.valve.pending == 1
    harness.producer.confirm(0)
    await settle()
    assert harness.valve.pending == 0
    assert harness.acks == []


async def test_after_close_new_messages_are_neither_produced_nor_acknowledged(harness: Harness) -> None:
    harness.handler.close()
    harness.publish("sensors/d1/temperature", GOOD, qos=1, mid=11)
    await settle()
    assert harness.producer.sent == []
    assert harness.acks == []
    assert harness.valve.idle.is_set()


async def test_unacknowledged_messages_are_not_reported_as_loop_errors() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    harness = Harness()
    quiet_unacknowledged(loop)
    harness.handler.close()
    harness.publish("sensors/d1/temperature", GOOD, qos=1, mid=12)
    loop.call_soon(lambda: 1 / 0)  # a real error still reaches the previous handler
    await settle()
    assert [type(context.get("exception")) for context in seen] == [ZeroDivisionError]
    loop.set_exception_handler(None)


async def test_mqtt_311_publish_without_a_properties_block_is_read_and_acknowledged(harness: Harness) -> None:
    harness.gmqtt._connection_state.protocol_version = MQTTv311
    name = b"sensors/d3/temperature"
    body = struct.pack("!H", len(name)) + name + struct.pack("!H", 21) + GOOD  # no properties in 3.1.1
    harness.gmqtt._handle_packet(MQTTCommands.PUBLISH | (1 << 1), body)
    await settle()
    ((topic, _, key, headers),) = harness.producer.sent
    assert (topic, key, dict(headers)["mqtt.topic"]) == ("sensors.readings", b"d1", name)
    harness.producer.confirm(0)
    await settle()
    assert harness.acks == [(PUBACK, 21, 0)]


async def test_a_malformed_publish_goes_to_gmqtts_parser_and_is_not_acknowledged(harness: Harness) -> None:
    # The topic length says 64 bytes, the packet has 5: gmqtt's parser fails, and its caller logs it.
    harness.gmqtt(Package(MQTTCommands.PUBLISH | (1 << 1), b"\x00\x40short"))
    await settle()
    assert harness.producer.sent == []
    assert harness.acks == []


async def test_payloads_nested_past_any_recursion_limit_are_dead_lettered_and_the_proxy_goes_on() -> None:
    """As deep as the parser CVEs' proofs (100,000 levels, within the default 256 KiB): each a
    dead letter that says why, acknowledged, and the next reading goes to Kafka as ever."""
    quiet_unacknowledged(asyncio.get_running_loop())
    routes = [
        *default_routes(),
        RouteSettings(filter="cbor/+/+", device_from="topic:1", metric_from="topic:2", format="cbor"),
    ]
    harness = Harness(MessageConverter(routes, AvroEncoder(schema_dict(SENSOR_READING), schema_id=1)))
    json_deep, cbor_deep = b"[" * 100_000 + b"]" * 100_000, b"\x81" * 100_000 + b"\x01"
    published = [
        ("sensors/d1/temperature", json_deep),
        ("cbor/d1/temperature", cbor_deep),
        ("sensors/d1/temperature", GOOD),
    ]
    for mid, (topic, payload) in enumerate(published, start=1):
        harness.publish(topic, payload, qos=1, mid=mid)
        await settle()
    assert [topic for topic, *_ in harness.producer.sent] == ["dlq", "dlq", "sensors.readings"]
    reasons = [dict(headers)["fluxgate.dlq.reason"] for topic, _, _, headers in harness.producer.sent[:2]]
    assert b"not valid JSON: nested too deeply" in reasons[0]
    assert b"not valid CBOR: maximum container nesting depth (64) exceeded" in reasons[1]
    harness.producer.confirm(0)  # the reading (the dead letters are confirmed at once)
    await settle()
    assert harness.acks == [(PUBACK, 1, 0), (PUBACK, 2, 0), (PUBACK, 3, 0)]
    assert harness.fatal == []
