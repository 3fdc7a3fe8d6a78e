"""gmqtt's ``on_message``: convert, produce, wait for Kafka, then let gmqtt acknowledge.

Outcomes per message:

* records confirmed by Kafka -> reason code 0 (success); PUBACK/PUBREC goes out;
* payload or reading rejected (over ``limits``, unparsable, invalid, or refused by Kafka
  for good) -> the original bytes go to the dead-letter topic with the reason in
  headers, bounded when they are too large to go whole; once Kafka has the dead letter,
  it is acknowledged too, so a restart never meets the same message again;
* Kafka away, or not even the bounded dead letter taken (the dead-letter topic is wrong)
  -> not acknowledged, and the proxy stops: the broker redelivers it to the next session.

QoS 0 has no acknowledgement; its handler still waits for Kafka, which (with the socket
valve) bounds how many QoS 0 messages can be in memory.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import structlog
from gmqtt.mqtt.constants import PubRecReasonCode

from fluxgate_core import metrics as core_metrics
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.delivery import Letter, Outcome, classify, dead_letter, deliver
from fluxgate_core.kafka import AsyncProducer
from fluxgate_mqtt_proxy import metrics
from fluxgate_mqtt_proxy.acks import AckSequencer, NotAcknowledged, Ticket
from fluxgate_mqtt_proxy.client import SocketValve
from fluxgate_mqtt_proxy.convert import MessageConverter, message_headers

log = structlog.get_logger(__name__)
SUCCESS = int(PubRecReasonCode.SUCCESS)


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

    def close(self) -> None:
        self._open = False

    async def on_message(self, client: Any, topic: str | bytes, payload: bytes, qos: int, properties: Any) -> int:
        """gmqtt calls this in a task per message; the returned reason code goes into PUBACK/PUBREC."""
        ticket = self._sequencer.ticket() if qos else None  # first: tasks start in arrival order
        name = topic if isinstance(topic, str) else topic.decode("utf-8", "replace")
        self._valve.entered()
        started = time.monotonic()
        try:
            await self._handle(name, payload or b"", qos, properties, ticket)
        except NotAcknowledged as exc:
            _child(metrics.UNACKNOWLEDGED, str(exc)).inc()
            if qos:
                raise
            return SUCCESS  # a QoS 0 task's exception would only be logged as "never retrieved"
        finally:
            self._valve.left()
        _child(metrics.ACKNOWLEDGED, str(qos)).inc()
        metrics.ACK_LATENCY.observe(time.monotonic() - started)
        return SUCCESS

    async def _handle(self, topic: str, payload: bytes, qos: int, properties: Any, ticket: Ticket | None) -> None:
        if not self._open:
            raise NotAcknowledged("shutting down")
        route = self._converter.route(topic)
        _child(metrics.MESSAGES, route.name if route else "", str(qos)).inc()
        _child(core_metrics.RECORDS_IN, "mqtt").inc()
        try:
            await self._deliver(topic, payload, user_properties(properties))
        except Exception as exc:  # Kafka away or the dead-letter topic broken: stop, unacknowledged
            log.error("message.not_delivered", topic=topic, error=str(exc), error_class=type(exc).__name__)
            self._on_fatal(exc)
            raise NotAcknowledged("not delivered") from exc
        if ticket is not None:
            await self._sequencer.turn(ticket)

    async def _deliver(self, topic: str, payload: bytes, properties: dict[str, str]) -> None:
        route = self._converter.route(topic)
        letter = Letter(
            payload,
            source=topic,
            key=route.device_from_topic(topic) if route else None,  # keeps a device's dead letters together
            headers=message_headers(topic, properties),
        )
        try:
            records = self._converter.convert(topic, payload, properties, int(time.time() * 1000))
        except Exception as exc:
            if classify(exc) is not Outcome.REJECTED:  # a payload that trips a bug: keep it, do not crash-loop
                log.exception("message.convert_failed", topic=topic)
            await dead_letter(self._dead_letters, letter, exc)
            return
        await deliver(self._producer, records, self._dead_letters, letter)


@functools.cache
def _child(metric: Any, *values: str) -> Any:
    """A labelled child, looked up once: ``labels()`` takes a lock and builds a key per call."""
    return metric.labels(*values)


def user_properties(properties: Any) -> dict[str, str]:
    """MQTT 5 user properties (gmqtt gives a list of key/value pairs) as a dict; {} for MQTT 3.1.1."""
    pairs = (properties or {}).get("user_property") or []
    return {str(key): str(value) for key, value in pairs}
