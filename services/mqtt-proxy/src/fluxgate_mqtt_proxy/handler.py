"""Every PUBLISH in: convert, produce, wait for Kafka, then acknowledge, a batch at a time.

gmqtt's packet handler parses everything one socket read brought and calls
:meth:`MessageHandler.receive` for each PUBLISH (see :func:`route_publishes`). Those
messages become one batch at the end of the event-loop turn: converted in arrival order,
produced in one go (so a device's records keep their order), Kafka's confirmations awaited
together, then acknowledged in arrival order once the batch before has been.

Outcomes per message:

* records confirmed by Kafka -> PUBACK/PUBREC with reason code 0 (success);
* payload or reading rejected (over ``limits``, unparsable, invalid, or refused by Kafka
  for good) -> the original bytes go to the dead-letter topic with the reason in
  headers, bounded when they are too large to go whole; once Kafka has the dead letter,
  it is acknowledged too, so a restart never meets the same message again;
* Kafka away, or not even the bounded dead letter taken (the dead-letter topic is wrong)
  -> not acknowledged, and the proxy stops: the broker redelivers it to the next session.

QoS 0 has no acknowledgement; its batch still waits for Kafka, which (with the socket
valve) bounds how many QoS 0 messages can be in memory.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import structlog
from gmqtt.mqtt.constants import PubRecReasonCode

from fluxgate_core import metrics as core_metrics
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.delivery import Delivery, Letter, Outcome, classify, deliver_batch
from fluxgate_core.kafka import AsyncProducer
from fluxgate_core.payloads import NO_ATTRIBUTES
from fluxgate_mqtt_proxy import metrics
from fluxgate_mqtt_proxy.acks import AckSequencer, Ticket
from fluxgate_mqtt_proxy.client import Acknowledge, SocketValve
from fluxgate_mqtt_proxy.convert import MessageConverter, message_headers

log = structlog.get_logger(__name__)
SUCCESS = int(PubRecReasonCode.SUCCESS)


class Inbound(NamedTuple):
    """A PUBLISH as gmqtt parsed it, with the connection it came on (``mid`` None for QoS 0)."""

    topic: str
    payload: bytes
    qos: int
    properties: Any
    mid: int | None
    connection: int


def _not_wired(acks: Sequence[tuple[int, int]]) -> None:
    raise RuntimeError("route_publishes() wires the acknowledgements first")


class MessageHandler:
    """Handles every MQTT message; ``close()`` makes it refuse new ones (shutdown)."""

    def __init__(
        self,
        converter: MessageConverter,
        producer: AsyncProducer,
        dead_letters: DeadLetterWriter,
        valve: SocketValve,
        sequencer: AckSequencer,
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self._converter = converter
        self._producer = producer
        self._dead_letters = dead_letters
        self._valve = valve
        self._sequencer = sequencer
        self._on_fatal = on_fatal
        self._open = True
        self._incoming: list[Inbound] = []
        self._batches: set[asyncio.Task[None]] = set()
        # Sends PUBACK (QoS 1) or PUBREC (QoS 2) for each (qos, packet id); set by route_publishes().
        self.acknowledge: Acknowledge = _not_wired

    def close(self) -> None:
        self._open = False

    def receive(self, topic: str | bytes, payload: bytes, qos: int, properties: Any, mid: int | None) -> None:
        """Called by gmqtt's packet handler for each PUBLISH, while it parses a socket read."""
        if not self._incoming:
            asyncio.get_running_loop().call_soon(self._start_batch)
        name = topic if isinstance(topic, str) else topic.decode("utf-8", "replace")
        self._incoming.append(Inbound(name, payload or b"", qos, properties, mid, self._sequencer.connection))

    def _start_batch(self) -> None:
        batch, self._incoming = self._incoming, []
        if not self._open:  # left unacknowledged: the broker redelivers them to the next session
            _child(metrics.UNACKNOWLEDGED, "shutting down").inc(len(batch))
            return
        self._valve.entered(len(batch))
        task = asyncio.get_running_loop().create_task(self._handle(batch, self._sequencer.ticket(), time.monotonic()))
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _handle(self, batch: list[Inbound], ticket: Ticket, received: float) -> None:
        try:
            try:
                await self._converter.prepare(message.topic for message in batch)
                outcomes = await deliver_batch(self._producer, self._dead_letters, self._deliveries(batch))
            except Exception as exc:  # a bug, the registry or the producer gone: nothing of the batch is acknowledged
                outcomes = [exc] * len(batch)
            await self._sequencer.turn(ticket)
            self._acknowledge(batch, outcomes)
            metrics.ACK_LATENCY.observe(time.monotonic() - received)
        finally:
            self._sequencer.done(ticket)
            self._valve.left(len(batch))

    def _deliveries(self, batch: Sequence[Inbound]) -> list[Delivery]:
        now_ms = int(time.time() * 1000)
        plan, convert = self._converter.plan, self._converter.convert
        deliveries = []
        labels = []
        for message in batch:
            topic, payload = message.topic, message.payload
            topic_plan = plan(topic)
            labels.append((topic_plan.label, message.qos))
            properties = user_properties(message.properties) if message.properties else NO_ATTRIBUTES
            headers = topic_plan.headers if not properties else message_headers(topic, properties)
            # The device from the topic, when the route names it, keeps a device's dead letters together.
            letter = Letter(payload, topic, topic_plan.device, headers)
            try:
                deliveries.append(Delivery(letter, convert(topic, payload, properties, now_ms, headers, topic_plan)))
            except Exception as exc:
                deliveries.append(self._rejected(letter, exc))
        # Counted per batch: a labelled child's inc() takes a lock.
        for (label, qos), count in collections.Counter(labels).items():
            _child(metrics.MESSAGES, label, str(qos)).inc(count)
        _child(core_metrics.RECORDS_IN, "mqtt").inc(len(batch))
        return deliveries

    @staticmethod
    def _rejected(letter: Letter, exc: Exception) -> Delivery:
        if classify(exc) is not Outcome.REJECTED:  # a payload that trips a bug: keep it, do not crash-loop
            log.exception("message.convert_failed", topic=letter.source)
        return Delivery(letter, rejected=exc)

    def _acknowledge(self, batch: Sequence[Inbound], outcomes: Sequence[BaseException | None]) -> None:
        """Acknowledge, in arrival order, what is done; what is not stays for the broker to redeliver."""
        current = self._sequencer.current
        # Connections only ever count up: first and last the same means all the same.
        if not any(outcomes) and current(batch[0].connection) and current(batch[-1].connection):
            self.acknowledge([(message.qos, message.mid) for message in batch if message.mid is not None])
            acknowledged = collections.Counter([message.qos for message in batch])
        else:
            acknowledged = self._acknowledge_each(batch, outcomes)
        for qos, count in acknowledged.items():
            _child(metrics.ACKNOWLEDGED, str(qos)).inc(count)

    def _acknowledge_each(
        self, batch: Sequence[Inbound], outcomes: Sequence[BaseException | None]
    ) -> collections.Counter[int]:
        acknowledged: collections.Counter[int] = collections.Counter()
        acks = []
        for message, failure in zip(batch, outcomes, strict=True):
            if failure is not None:  # Kafka away or the dead-letter topic broken: stop, unacknowledged
                self._not_delivered(message, failure)
            elif message.qos and not self._sequencer.current(message.connection):
                _child(metrics.UNACKNOWLEDGED, "connection lost").inc()
            else:
                if message.mid is not None:
                    acks.append((message.qos, message.mid))
                acknowledged[message.qos] += 1
        self.acknowledge(acks)
        return acknowledged

    def _not_delivered(self, message: Inbound, failure: BaseException) -> None:
        log.error("message.not_delivered", topic=message.topic, error=str(failure), error_class=type(failure).__name__)
        _child(metrics.UNACKNOWLEDGED, "not delivered").inc()
        self._on_fatal(failure)


@functools.cache
def _child(metric: Any, *values: str) -> Any:
    """A labelled child, looked up once: ``labels()`` takes a lock and builds a key per call."""
    return metric.labels(*values)


def user_properties(properties: Any) -> Mapping[str, str]:
    """MQTT 5 user properties (gmqtt gives a list of key/value pairs) as a dict; {} for MQTT 3.1.1."""
    pairs = (properties or {}).get("user_property") or []
    return {str(key): str(value) for key, value in pairs}
