"""Replay: dead letters' original bytes, key and headers back to the topic they came from,
once, audited.

Each replay is one Kafka transaction holding the records sent and their
:data:`~fluxgate_core.schemas.REPLAY_AUDIT` record (who, when, what was selected, each
dead letter and where it landed). The audit topic, read back ``read_committed``, is the
memory of what was replayed: a dead letter found there is never sent again, by this
console after a restart or by another one (they share the transactional id, so an older
instance still holding a transaction is fenced).
"""

from __future__ import annotations

import collections
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from fluxgate_console import metrics
from fluxgate_console.deadletters import REPLAY_ID, REPLAY_OF, DeadLetter, replay_refusal
from fluxgate_core.errors import FluxgateError
from fluxgate_core.kafka import ensure_topics
from fluxgate_core.schemas import REPLAY_AUDIT, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder, registry_client
from fluxgate_core.settings import RegistrySettings

log = structlog.get_logger(__name__)


class ReplayError(FluxgateError):
    """The replay did not happen: nothing of it was committed."""


@dataclass(frozen=True)
class Plan:
    """What a replay of a selection would do."""

    send: list[DeadLetter]
    already: list[str]  # ids replayed before
    not_replayable: list[tuple[str, str]]  # (id, why)

    def targets(self) -> dict[str, int]:
        """How many records each target topic would get."""
        return dict(collections.Counter(x.replay_target or "" for x in self.send))

    def as_json(self) -> dict[str, Any]:
        return {
            "send": [{"id": x.id, "target": x.replay_target} for x in self.send],
            "targets": self.targets(),
            "already_replayed": self.already,
            "not_replayable": [{"id": i, "why": why} for i, why in self.not_replayable],
        }


@dataclass(frozen=True)
class Outcome:
    replay_id: str | None
    sent: list[dict[str, Any]] = field(default_factory=list)
    plan: Plan | None = None


class AuditLog:
    """The ids of every dead letter replayed so far, from the audit topic (read_committed)."""

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        decode: Callable[[bytes], dict[str, Any]],
        prepare: Callable[[], None] = lambda: None,
    ) -> None:
        self._config = {
            **config,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,  # the end reached, even of an empty or only-aborted partition
        }
        self._topic = topic
        self._decode = decode
        self._prepare = prepare  # creates the topic (and registers its schema) on first use
        self._consumer: Consumer | None = None
        self._reached: dict[int, int] = {}  # partition → the offset read up to (from the end-of-partition events)
        self.replayed: set[str] = set()

    def catch_up(self, timeout_s: float) -> None:
        """Read the audit topic up to its end (committed transactions), within ``timeout_s``."""
        consumer = self._open(timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            behind = [tp for tp in consumer.assignment() if self._position(consumer, tp) < self._end(consumer, tp)]
            if not behind:
                return
            for message in consumer.consume(100, timeout=0.2):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    self._reached[message.partition() or 0] = message.offset() or 0
                elif error is None and message.value():
                    self.remember(self._decode(message.value() or b""))
        raise ReplayError(f"the audit topic {self._topic} could not be read to its end in {timeout_s}s")

    def remember(self, audit: dict[str, Any]) -> None:
        for record in audit.get("records", []):
            self.replayed.add(
                f"{record['deadletter_topic']}/{record['deadletter_partition']}/{record['deadletter_offset']}"
            )

    def _open(self, timeout_s: float) -> Consumer:
        if self._consumer is None:
            self._prepare()
            consumer = Consumer(self._config)
            try:
                partitions = consumer.list_topics(self._topic, timeout=timeout_s).topics[self._topic].partitions
            except (KafkaException, KeyError) as exc:
                consumer.close()
                raise ReplayError(f"cannot read the audit topic {self._topic}: {exc}") from exc
            consumer.assign([TopicPartition(self._topic, p, 0) for p in partitions])
            self._consumer = consumer
        return self._consumer

    def _position(self, consumer: Consumer, tp: TopicPartition) -> int:
        """Where reading ``tp`` got to. Until a record is read the consumer's position is
        OFFSET_INVALID (-1001), below every end: an empty audit topic was never caught up
        with. The end-of-partition event says where reading stopped, records or not."""
        position = int(consumer.position([tp])[0].offset)
        return max(position, self._reached.get(tp.partition, 0))

    def _end(self, consumer: Consumer, tp: TopicPartition) -> int:
        _, high = consumer.get_watermark_offsets(tp, timeout=5.0, cached=False)
        return int(high)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
            self._reached.clear()


class AuditCodec:
    """``ReplayAudit`` records in the Confluent wire format; the topic is created and the schema
    registered on first use, so the console starts (read-only) while the registry is away."""

    def __init__(self, registry: RegistrySettings, admin_config: dict[str, Any], topic: str) -> None:
        self._registry = registry
        self._admin_config = admin_config
        self._topic = topic
        self._encoder: AvroEncoder | None = None
        self._decoder: AvroDecoder | None = None

    def prepare(self) -> None:
        if self._encoder is not None:
            return
        try:
            ensure_topics(self._admin_config, {self._topic: 1})
        except FluxgateError as exc:
            raise ReplayError(f"cannot create the audit topic {self._topic}: {exc}") from exc
        client = registry_client(self._registry)
        try:
            self._encoder = AvroEncoder.registered(
                client, self._topic, schema_text(REPLAY_AUDIT), schema_dict(REPLAY_AUDIT), self._registry.compatibility
            )
        except FluxgateError as exc:
            raise ReplayError(f"cannot register the audit schema: {exc}") from exc
        self._decoder = AvroDecoder(client)

    def encode(self, record: dict[str, Any]) -> bytes:
        self.prepare()
        assert self._encoder is not None
        return self._encoder.encode(record)

    def decode(self, data: bytes) -> dict[str, Any]:
        self.prepare()
        assert self._decoder is not None
        return self._decoder.decode(data)


class Replayer:
    """Plans and performs replays; one at a time (a lock), each one transaction."""

    def __init__(
        self,
        producer_config: dict[str, Any],
        audit: AuditLog,
        audit_topic: str,
        encode: Callable[[dict[str, Any]], bytes],
        max_records: int,
        timeout_s: float = 30.0,
        producer_factory: Callable[[dict[str, Any]], Producer] = Producer,
        *,
        targets: Mapping[str, Sequence[str]],
    ) -> None:
        self._producer_config = producer_config
        self._producer_factory = producer_factory
        self._producer: Producer | None = None
        self._audit = audit
        self._audit_topic = audit_topic
        self._encode = encode
        self._max_records = max_records
        self._targets = targets  # per dead-letter topic, the only topics a replay writes to
        self._timeout = timeout_s
        self._lock = threading.Lock()

    def plan(self, letters: Iterable[DeadLetter]) -> Plan:
        """Which of ``letters`` a replay would send now (catching up with the audit first).
        Under the replay lock: a preview and a replay never read the audit log (one consumer,
        opened on first use) from two threads at once."""
        with self._lock:
            return self._caught_up_plan(letters)

    def _caught_up_plan(self, letters: Iterable[DeadLetter]) -> Plan:
        self._audit.catch_up(self._timeout)
        return self._plan(letters)

    def _plan(self, letters: Iterable[DeadLetter]) -> Plan:
        send, already, refused = [], [], []
        for letter in letters:
            why = replay_refusal(letter, self._targets)
            if letter.id in self._audit.replayed:
                already.append(letter.id)
            elif why:
                refused.append((letter.id, why))
            else:
                send.append(letter)
        if len(send) > self._max_records:
            over = f"over the {self._max_records} records one replay may send"
            refused += [(x.id, over) for x in send[self._max_records :]]
            send = send[: self._max_records]
        return Plan(send, already, refused)

    def replay(self, letters: Sequence[DeadLetter], requested_by: str, selection: dict[str, Any]) -> Outcome:
        """Send what :meth:`plan` says, with its audit record, in one transaction."""
        with self._lock:
            plan = self._caught_up_plan(letters)
            if not plan.send:
                return Outcome(None, plan=plan)
            replay_id = str(uuid.uuid4())
            try:
                sent = self._transaction(replay_id, plan, requested_by, selection)
            except Exception as exc:  # Kafka's, or the audit record's encoding: aborted either way
                metrics.REPLAY_FAILURES.inc()
                raise ReplayError(f"replay {replay_id} not committed: {exc}") from exc
            metrics.REPLAYED.inc(len(sent))
            log.info("replay.committed", replay_id=replay_id, records=len(sent), requested_by=requested_by)
            return Outcome(replay_id, sent, plan)

    def _transaction(
        self, replay_id: str, plan: Plan, requested_by: str, selection: dict[str, Any]
    ) -> list[dict[str, Any]]:
        producer = self._open()
        producer.begin_transaction()
        try:
            landed = self._send(producer, plan.send, replay_id)
            audit = {
                "replay_id": replay_id,
                "requested_by": requested_by,
                "requested_at": int(time.time() * 1000),
                "selection": json.dumps(selection, sort_keys=True),
                "records": landed,
                "skipped": len(plan.already) + len(plan.not_replayable),
            }
            producer.produce(self._audit_topic, self._encode(audit), replay_id.encode())
            producer.commit_transaction(self._timeout)
        except Exception:  # an open transaction would fail every later replay's begin_transaction
            self._abort(producer)
            raise
        self._audit.remember(audit)
        return landed

    def _send(self, producer: Producer, letters: Sequence[DeadLetter], replay_id: str) -> list[dict[str, Any]]:
        landed: list[dict[str, Any]] = []
        failures: list[str] = []

        def delivered(letter: DeadLetter, err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(f"{letter.id}: {err}")
                return
            landed.append(
                {
                    "deadletter_topic": letter.topic,
                    "deadletter_partition": letter.partition,
                    "deadletter_offset": letter.offset,
                    "target_topic": msg.topic(),
                    "target_partition": msg.partition(),
                    "target_offset": msg.offset(),
                }
            )

        for letter in letters:
            headers: list[tuple[str, str | bytes | None]] = [
                *letter.original_headers,
                (REPLAY_OF, letter.id.encode()),
                (REPLAY_ID, replay_id.encode()),
            ]
            target = letter.replay_target or ""
            producer.produce(target, letter.value, letter.key, headers=headers, on_delivery=_bind(delivered, letter))
        if producer.flush(self._timeout) or failures:
            raise KafkaException(f"not every replayed record was taken: {failures[:3] or 'flush timed out'}")
        return landed

    def _open(self) -> Producer:
        if self._producer is None:
            producer = self._producer_factory(self._producer_config)
            producer.init_transactions(self._timeout)
            self._producer = producer
        return self._producer

    def _abort(self, producer: Producer) -> None:
        try:
            producer.abort_transaction(self._timeout)
        except KafkaException as exc:  # fenced or broken: start over with a new producer next time
            log.warning("replay.abort_failed", error=str(exc))
            self._producer = None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None
        self._audit.close()


def _bind(callback: Callable[[DeadLetter, Any, Any], None], letter: DeadLetter) -> Callable[[Any, Any], None]:
    return lambda err, msg: callback(letter, err, msg)


def transactional_config(producer_config: dict[str, Any], transactional_id: str) -> dict[str, Any]:
    """A producer config for replays: transactional, with a delivery timeout a transaction allows."""
    return {**producer_config, "transactional.id": transactional_id, "delivery.timeout.ms": 30_000, "linger.ms": 0}
