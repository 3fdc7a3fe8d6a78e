"""Replay as one transaction: originals back to their topic with their key and headers, the
audit record beside them, nothing twice, nothing committed when Kafka refuses."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from confluent_kafka import KafkaException
from console_recorded import aggregator_letter, forged_letter, gateway_letter, sink_letter

from fluxgate_console.replay import Replayer, ReplayError, transactional_config

TARGETS = {"sensors.deadletter": ["sensors.readings"], "persisters.deadletter": ["temperatures.aggregated"]}


class Message:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._where = (topic, partition, offset)

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]


class FakeProducer:
    """A transactional producer that keeps what was committed; ``refuse`` fails the next commit."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.pending: list[tuple[str, bytes, bytes | None, Any]] = []
        self.callbacks: list[Any] = []
        self.committed: list[tuple[str, bytes, bytes | None, Any]] = []
        self.refuse = False
        self.open = False
        self.offsets: dict[str, int] = {}

    def init_transactions(self, timeout: float) -> None: ...

    def begin_transaction(self) -> None:
        if self.open:
            raise KafkaException("a transaction is already open")  # as librdkafka refuses it
        self.open = True
        self.pending, self.callbacks = [], []

    def produce(
        self, topic: str, value: bytes, key: bytes | None = None, headers: Any = None, on_delivery: Any = None
    ) -> None:
        self.pending.append((topic, value, key, headers))
        self.callbacks.append((topic, on_delivery))

    def flush(self, timeout: float) -> int:
        for topic, callback in self.callbacks:
            if callback:
                self.offsets[topic] = self.offsets.get(topic, -1) + 1
                callback(None, Message(topic, 0, self.offsets[topic]))
        self.callbacks = []
        return 0

    def commit_transaction(self, timeout: float) -> None:
        if self.refuse:
            raise KafkaException("transaction timed out")
        self.committed += self.pending
        self.open = False

    def abort_transaction(self, timeout: float) -> None:
        self.pending, self.open = [], False


class FakeAudit:
    def __init__(self) -> None:
        self.replayed: set[str] = set()

    def catch_up(self, timeout_s: float) -> None: ...

    def remember(self, audit: dict[str, Any]) -> None:
        for r in audit["records"]:
            self.replayed.add(f"{r['deadletter_topic']}/{r['deadletter_partition']}/{r['deadletter_offset']}")

    def close(self) -> None: ...


@pytest.fixture
def replayer() -> tuple[Replayer, list[FakeProducer]]:
    made: list[FakeProducer] = []

    def factory(config: dict[str, Any]) -> FakeProducer:
        made.append(FakeProducer(config))
        return made[-1]

    replay = Replayer(
        transactional_config({"bootstrap.servers": "x"}, "tx"), FakeAudit(), "console.replays",  # type: ignore[arg-type]
        lambda record: json.dumps(record).encode(), max_records=2, producer_factory=factory,  # type: ignore[arg-type]
        targets=TARGETS,
    )  # fmt: skip
    return replay, made


def test_originals_go_back_with_their_audit_in_one_transaction(replayer: tuple[Replayer, list[FakeProducer]]) -> None:
    replay, made = replayer
    letters = [aggregator_letter(4, 99), gateway_letter(5)]
    outcome = replay.replay(letters, "ops", {"ids": ["sensors.deadletter/1/4"]})
    (producer,) = made
    assert producer.config["transactional.id"] == "tx"
    sent, audit = producer.committed
    topic, value, key, headers = sent
    assert (topic, value, key) == ("sensors.readings", letters[0].value, b"dev-3")
    assert ("fluxgate.replay.of", b"sensors.deadletter/1/4") in headers
    assert not [h for h, _ in headers if h.startswith("fluxgate.dlq.")]  # the explanation stays behind
    record = json.loads(audit[1])
    assert audit[0] == "console.replays" and audit[2] == (outcome.replay_id or "").encode()
    assert record["requested_by"] == "ops" and record["skipped"] == 1
    assert record["records"] == [
        {"deadletter_topic": "sensors.deadletter", "deadletter_partition": 1, "deadletter_offset": 4,
         "target_topic": "sensors.readings", "target_partition": 0, "target_offset": 0},
    ]  # fmt: skip
    assert outcome.plan and outcome.plan.not_replayable[0][0] == "sensors.deadletter/0/5"


def test_the_same_selection_twice_sends_nothing_the_second_time(
    replayer: tuple[Replayer, list[FakeProducer]],
) -> None:
    replay, made = replayer
    letters = [aggregator_letter(4, 99), sink_letter(7)]
    assert len(replay.replay(letters, "ops", {}).sent) == 2
    again = replay.replay(letters, "ops", {})
    assert again.replay_id is None and again.sent == []
    assert again.plan and sorted(again.plan.already) == ["persisters.deadletter/0/7", "sensors.deadletter/1/4"]
    assert len(made[0].committed) == 3  # two records and one audit, once


def test_a_refused_commit_sends_nothing_and_can_be_tried_again(
    replayer: tuple[Replayer, list[FakeProducer]],
) -> None:
    replay, made = replayer
    replay.plan([])  # nothing opened yet: the producer is made on the first replay
    assert made == []
    letters = [aggregator_letter(4, 99)]
    replay.replay([], "ops", {})
    made_first = FakeProducer({})
    made_first.refuse = True
    replay._producer = made_first  # type: ignore[assignment]
    with pytest.raises(ReplayError, match="not committed"):
        replay.replay(letters, "ops", {})
    assert made_first.committed == []
    made_first.refuse = False
    assert len(replay.replay(letters, "ops", {}).sent) == 1  # not remembered as replayed: it was not


def test_one_replay_sends_at_most_max_records(replayer: tuple[Replayer, list[FakeProducer]]) -> None:
    replay, _ = replayer
    plan = replay.plan([aggregator_letter(i, i) for i in range(3)])
    assert len(plan.send) == 2 and "over the 2 records" in plan.not_replayable[0][1]


def test_an_audit_record_that_cannot_be_encoded_aborts_and_the_next_replay_works(
    replayer: tuple[Replayer, list[FakeProducer]],
) -> None:
    replay, made = replayer
    encode = replay._encode

    def broken(record: dict[str, Any]) -> bytes:
        raise ValueError("the registry refused the audit schema")

    replay._encode = broken  # type: ignore[assignment]
    with pytest.raises(ReplayError, match="not committed"):
        replay.replay([aggregator_letter(5, 7)], "ops", {})
    replay._encode = encode
    assert made[-1].committed == []
    assert len(replay.replay([aggregator_letter(5, 7)], "ops", {}).sent) == 1


def test_a_forged_source_topic_header_never_writes_outside_the_allowed_targets(
    replayer: tuple[Replayer, list[FakeProducer]],
) -> None:
    """Issue 35: a device's MQTT 5 user property ``fluxgate.dlq.topic: temperatures.aggregated``
    reaches the gateway's dead letter verbatim; temperatures.aggregated is a target only for
    the persisters' dead letters, so "replay all matching" leaves it out, saying why."""
    replay, made = replayer
    forged, legit = forged_letter(8), aggregator_letter(4, 99)
    outcome = replay.replay([forged, legit], "ops", {"filter": {"topic": "sensors.deadletter"}})
    assert [topic for topic, *_ in made[0].committed] == ["sensors.readings", "console.replays"]
    assert outcome.plan and outcome.plan.targets() == {"sensors.readings": 1}
    ((refused, why),) = outcome.plan.not_replayable
    assert refused == forged.id and "temperatures.aggregated" in why and "sensors.deadletter" in why


def test_a_letter_claiming_its_source_twice_is_not_replayed(replayer: tuple[Replayer, list[FakeProducer]]) -> None:
    """A forged header beside the genuine one: which one the writer meant cannot be told."""
    replay, made = replayer
    legit = sink_letter(9)
    doubled = dataclasses.replace(legit, headers=(("fluxgate.dlq.topic", b"sensors.readings"), *legit.headers))
    plan = replay.plan([doubled])
    assert plan.send == [] and "fluxgate.dlq.topic" in plan.not_replayable[0][1]
    assert made == []
