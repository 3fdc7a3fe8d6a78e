"""An asyncio face on confluent-kafka's producer (and, re-exported, the consumer).

``send`` returns an awaitable that resolves when Kafka has the record (acks=all), which
is what lets a gateway acknowledge its own input only after Kafka confirmed it. The
number of records awaiting confirmation is bounded: when Kafka is away the bound fills
and ``send`` waits, which is the backpressure the gateways pass on to their devices.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import structlog
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from fluxgate_core import metrics
from fluxgate_core.consumer import Decoder, PartitionKey, RecordConsumer
from fluxgate_core.errors import DeliveryError
from fluxgate_core.kafka_errors import config_error, converted

__all__ = [
    "AsyncProducer",
    "Decoder",
    "Headers",
    "KafkaRecord",
    "PartitionKey",
    "RecordConsumer",
    "create_topics",
    "ensure_topics",
    "make_producer",
]

Headers = Sequence[tuple[str, bytes | str | None]]
PUMP_INTERVAL_S = 0.001
PROBE_INTERVAL_S = 2.0  # while every broker is down, how often healthy() asks Kafka again
log = structlog.get_logger(__name__)


class KafkaRecord(NamedTuple):
    """A record ready to produce: what a gateway's converter hands to the producer.

    A named tuple rather than a frozen dataclass: one is built per reading, and a tuple is
    built several times faster.
    """

    topic: str
    key: bytes | None
    value: bytes
    headers: Sequence[tuple[str, bytes]] = ()


class AsyncProducer:
    """Idempotent producer with delivery futures and a bounded number in flight."""

    def __init__(self, config: dict[str, Any], *, max_in_flight: int = 10_000, poll_timeout: float = 0.1) -> None:
        try:
            self._producer = Producer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise config_error(exc, "producer") from exc
        self._slots = Capacity(max_in_flight)
        self._in_flight = 0
        self._in_flight_reported = 0
        self._poll_timeout = poll_timeout
        self._stopping = threading.Event()
        self._poller: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.last_error: KafkaError | None = None
        self._brokers_down = False
        self._next_probe = 0.0  # while brokers are down: no metadata probe before this (monotonic)
        # Delivery reports arrive in librdkafka's callback thread; they are handed to the
        # event loop in batches, one wake-up per batch instead of one per record.
        self._reports: list[tuple[Any, ...]] = []  # the arguments of each _report call
        self._reports_lock = threading.Lock()
        self._drain_scheduled = False
        # While records are in flight the event loop itself serves delivery reports, every
        # PUMP_INTERVAL_S: no thread then has to take the GIL for each report and wake the loop.
        self._pumping = threading.Event()
        self._pump_handle: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        """Start the thread that serves delivery reports (poll must never block the loop)."""
        self._loop = asyncio.get_running_loop()
        self._poller = threading.Thread(target=self._poll_forever, name="kafka-poll", daemon=True)
        self._poller.start()

    async def send(
        self, topic: str, value: bytes, *, key: bytes | str | None = None, headers: Headers | None = None
    ) -> asyncio.Future[Message]:
        """Enqueue a record; wait only for a free slot. Await the returned future for Kafka's ack."""
        await self._slots.acquire()
        assert self._loop is not None, "start() the producer first"
        future: asyncio.Future[Message] = self._loop.create_future()
        while True:
            try:
                self._producer.produce(
                    topic, value, key, headers=list(headers or ()), on_delivery=partial(self._report, future)
                )
                break
            except BufferError:
                # librdkafka's own queue is full: give it time to drain rather than drop.
                await asyncio.sleep(0.05)
            except (KafkaException, RuntimeError, TypeError) as exc:
                self._slots.release()
                raise converted(exc, DeliveryError, f"cannot produce to {topic}") from exc
        self._in_flight += 1
        metrics.KAFKA_IN_FLIGHT.inc()
        self._in_flight_reported += 1
        return future

    async def send_many(self, records: Sequence[KafkaRecord]) -> asyncio.Future[list[BaseException | None]]:
        """Enqueue ``records`` in order (waiting for room for all of them, first come first served);
        the returned future resolves once Kafka answered for every one: per record None
        (confirmed) or the :class:`DeliveryError` it got. One future and one wake-up per batch
        rather than per record."""
        assert self._loop is not None, "start() the producer first"
        await self._slots.acquire(len(records))
        batch = _Batch(self._loop.create_future(), len(records))
        if not records:
            batch.future.set_result([])
            return batch.future
        produce = self._producer.produce
        index = 0
        try:
            while index < len(records):
                record = records[index]
                try:
                    produce(
                        record.topic,
                        record.value,
                        record.key,
                        headers=record.headers if type(record.headers) is list else list(record.headers),
                        on_delivery=partial(self._report, batch, index),
                    )
                except BufferError:
                    await asyncio.sleep(0.05)  # librdkafka's own queue is full: let it drain
                    continue
                index += 1
        except (KafkaException, RuntimeError, TypeError) as exc:
            self._slots.release(len(records) - index)
            batch.fail_rest(index, converted(exc, DeliveryError, f"cannot produce to {records[index].topic}"))
        self._in_flight += index
        self._pump_soon()
        return batch.future

    def _pump_soon(self) -> None:
        if self._pump_handle is None and self._loop is not None:
            self._pumping.set()
            self._pump_handle = self._loop.call_later(PUMP_INTERVAL_S, self._pump)

    def _pump(self) -> None:
        self._pump_handle = None
        self._producer.poll(0)
        self._drain_reports()
        if self._in_flight:
            self._pump_soon()
        else:
            self._pumping.clear()  # idle: the thread serves what comes (errors, late reports)

    async def deliver(
        self, topic: str, value: bytes, *, key: bytes | str | None = None, headers: Headers | None = None
    ) -> Message:
        """Send and wait for Kafka's acknowledgement."""
        return await (await self.send(topic, value, key=key, headers=headers))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def healthy(self, probe_timeout: float = 1.0) -> bool:
        """False while every broker is down.

        librdkafka says once that it lost every broker (then only per-connection transport
        errors) and never says it got one back. So "down" is a state: set by that report,
        cleared by a confirmed delivery or, for an idle producer, by a metadata request here,
        at most one every ``PROBE_INTERVAL_S``.
        """
        if not self._brokers_down:
            return True
        if time.monotonic() < self._next_probe:
            return False
        try:
            self._producer.list_topics(timeout=probe_timeout)
        except KafkaException:
            # A failed probe holds for a while: each costs its whole timeout, and readiness
            # checks come often (a test's, or several probes of an orchestrator).
            self._next_probe = time.monotonic() + PROBE_INTERVAL_S
            return False
        self._brokers_down = False
        return True

    async def flush(self, timeout: float = 30.0) -> int:
        """Wait until every queued record is confirmed; return how many are still queued."""
        return int(await asyncio.to_thread(self._producer.flush, timeout))

    async def stop(self, timeout: float = 30.0) -> None:
        """Drain in-flight records, then stop the delivery thread. Safe to call twice."""
        remaining = await self.flush(timeout)
        if remaining:
            log.warning("producer.stop.undelivered", remaining=remaining)
        self._stopping.set()
        if self._poller is not None:
            await asyncio.to_thread(self._poller.join, 5.0)
            self._poller = None

    def _report(self, *args: Any) -> None:
        """librdkafka's delivery callback (poll or flush thread, or the loop's pump): queue, wake
        the loop once (the pump drains what it served itself).

        ``(future, err, msg)`` for :meth:`send`, ``(batch, index, err, msg)`` for :meth:`send_many`.
        """
        with self._reports_lock:
            self._reports.append(args)
            if self._drain_scheduled or (self._pump_handle is None and self._pumping.is_set()):
                return
            self._drain_scheduled = True
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._drain_reports)

    def _drain_reports(self) -> None:
        with self._reports_lock:
            reports, self._reports = self._reports, []
            self._drain_scheduled = False
        for report in reports:
            if len(report) == 3:
                self._settle(*report)
            else:
                self._settle_batched(*report)
        self._slots.release(len(reports))
        self._in_flight -= len(reports)
        # The gauge moves once per wake-up: it takes a lock, which per record costs more than the rest.
        metrics.KAFKA_IN_FLIGHT.inc(self._in_flight - self._in_flight_reported)
        self._in_flight_reported = self._in_flight

    def _settle_batched(self, batch: _Batch, index: int, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self._brokers_down = False
            batch.settle(index, None)
            return
        metrics.KAFKA_DELIVERY_ERRORS.labels(msg.topic() or "").inc()
        batch.settle(index, DeliveryError(f"Kafka rejected record: {err.str()}", retriable=err.retriable()))

    def _settle(self, future: asyncio.Future[Message], err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self._brokers_down = False
        if future.done():
            return
        if err is None:
            future.set_result(msg)
            return
        metrics.KAFKA_DELIVERY_ERRORS.labels(msg.topic() or "").inc()
        future.set_exception(DeliveryError(f"Kafka rejected record: {err.str()}", retriable=err.retriable()))

    def _poll_forever(self) -> None:
        while not self._stopping.is_set():
            if self._pumping.is_set():
                self._stopping.wait(self._poll_timeout)  # the loop's pump serves the reports meanwhile
            else:
                self._producer.poll(self._poll_timeout)

    def _on_error(self, err: KafkaError) -> None:
        self.last_error = err
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._brokers_down = True


class Capacity:
    """Room for ``size`` units (records in flight), taken and given back in any amounts.

    First come, first served: a request waits behind earlier ones even when it would fit, so
    batches reach the producer in the order they asked (per-device order). A request larger
    than ``size`` is let through alone, when nothing else is in flight.
    """

    def __init__(self, size: int) -> None:
        self._free = size
        self._size = size
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    def _fits(self, count: int) -> bool:
        return count <= self._free or self._free == self._size

    async def acquire(self, count: int = 1) -> None:
        if not self._waiters and self._fits(count):
            self._free -= count
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (count, waiter)
        self._waiters.append(entry)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(count)  # granted just as we were cancelled: give it back
            else:
                self._waiters.remove(entry)
                self._wake()
            raise

    def release(self, count: int = 1) -> None:
        self._free += count
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            count, waiter = self._waiters.popleft()
            if not waiter.done():
                self._free -= count
                waiter.set_result(None)


class _Batch:
    """The answers for one :meth:`AsyncProducer.send_many`; its future resolves with the last one."""

    __slots__ = ("errors", "future", "remaining")

    def __init__(self, future: asyncio.Future[list[BaseException | None]], count: int) -> None:
        self.future = future
        self.errors: list[BaseException | None] = [None] * count
        self.remaining = count

    def settle(self, index: int, error: BaseException | None) -> None:
        if error is not None:
            self.errors[index] = error
        self.remaining -= 1
        if not self.remaining and not self.future.done():
            self.future.set_result(self.errors)

    def fail_rest(self, start: int, error: BaseException) -> None:
        """Records from ``start`` on were never produced: they answer ``error`` at once."""
        for index in range(start, len(self.errors)):
            self.settle(index, error)


def make_producer(config: dict[str, Any], *, max_in_flight: int = 10_000) -> AsyncProducer:
    """An :class:`AsyncProducer` whose client errors (brokers down...) are logged and tracked."""
    holder: list[AsyncProducer] = []

    def on_error(err: KafkaError) -> None:
        log.warning("kafka.client.error", code=err.name(), reason=err.str())
        if holder:
            holder[0]._on_error(err)

    producer = AsyncProducer({**config, "error_cb": on_error}, max_in_flight=max_in_flight)
    holder.append(producer)
    return producer


def ensure_topics(
    admin_config: dict[str, Any], topics: dict[str, int], replication: int = -1, config: dict[str, str] | None = None
) -> None:
    """Create the topics that do not exist yet (idempotent); ``-1`` = the broker's default replication.
    ``config`` (topic-level settings such as ``retention.ms``) applies to the topics created here."""
    try:
        admin = AdminClient(admin_config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise config_error(exc, "admin") from exc
    try:
        existing = set(admin.list_topics(timeout=10).topics)
    except KafkaException as exc:
        raise converted(exc, DeliveryError, "cannot list topics") from exc
    wanted = {name: partitions for name, partitions in topics.items() if name not in existing}
    create_topics(admin, wanted, replication, config)


def create_topics(
    admin: AdminClient, topics: dict[str, int], replication: int = -1, config: dict[str, str] | None = None
) -> list[str]:
    """Create ``topics`` (name -> partitions) with ``admin``; one created meanwhile by someone
    else counts as there. The names created now; a refusal raises :class:`DeliveryError`."""
    wanted = [NewTopic(name, partitions, replication, config=dict(config or {})) for name, partitions in topics.items()]
    created = []
    for name, future in admin.create_topics(wanted).items() if wanted else ():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise converted(exc, DeliveryError, f"cannot create topic {name}") from exc
            continue
        created.append(name)
    await_listed(admin, set(created))
    return created


def await_listed(admin: AdminClient, names: set[str], timeout: float = 10.0) -> None:
    """Wait until the broker lists ``names``. CreateTopics answers once the controller has a
    topic, and a broker learns of it a moment later (KRaft): a DescribeConfigs in between, such
    as the batch-size fit at a start that created its topics, is answered UNKNOWN_TOPIC_OR_PART."""
    deadline = time.monotonic() + timeout
    while names and time.monotonic() < deadline:
        try:
            # each listing gets what is left, so the whole wait stays within ``timeout``
            left = max(0.1, deadline - time.monotonic())
            names = names - set(admin.list_topics(timeout=left).topics)
        except KafkaException:
            return  # Kafka away: whatever uses the topics next says so
        if names:
            time.sleep(0.05)
    if names:
        log.warning("kafka.topics.not_listed", topics=sorted(names), waited_s=timeout)
