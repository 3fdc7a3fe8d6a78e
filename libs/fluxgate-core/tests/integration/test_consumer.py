"""RecordConsumer against the real broker: nothing skipped, rebalances, seeks, pauses, commits."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from fluxgate_testing import unique_topic

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.consumer import PartitionKey, RecordConsumer
from fluxgate_core.errors import CommitError, ConfigError, RegistryError, SerializationError
from fluxgate_core.kafka import ensure_topics
from fluxgate_core.settings import KafkaSettings

pytestmark = pytest.mark.integration
PARTITIONS = 3
PER_PARTITION = 20


class FlakyDecoder:
    """Decodes ``n=<int>`` values; the registry is 'away' on every ``every``-th call, and a
    value ``poison`` never decodes."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.calls = 0
        self.away = 0  # how often it said the registry is away

    def decode(self, data: bytes) -> dict[str, Any]:
        self.calls += 1
        if self.calls % self.every == 0:
            self.away += 1
            raise RegistryError("registry away (fake)")
        if data == b"poison":
            raise SerializationError("not a record (fake)")
        return {"n": int(data.decode().split("=")[1])}


@pytest.fixture
def topic(stack: Any) -> str:
    name = unique_topic("test.consumer", stack.bootstrap, partitions=PARTITIONS)
    produce(stack, name, PER_PARTITION)
    return name


def produce(stack: Any, topic: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    for n in range(PARTITIONS * per_partition):
        producer.produce(topic, f"n={n}".encode(), partition=n % PARTITIONS, headers=[("h", b"1"), ("h", b"2")])
    assert producer.flush(10) == 0


def config(stack: Any, group: str | None = None, **extra: Any) -> dict[str, Any]:
    settings = KafkaSettings.model_validate({"bootstrap_servers": stack.bootstrap})
    return {**settings.consumer_config(group or f"g-{uuid.uuid4().hex[:8]}", "core-test"), **extra}


def read_all(consumer: RecordConsumer, count: int, timeout: float = 60.0) -> tuple[list[ConsumedRecord], int]:
    """Poll until ``count`` records arrived, counting (and riding over) retriable failures."""
    got: list[ConsumedRecord] = []
    failures = 0
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        try:
            got.extend(consumer.poll_batch(max_records=7, timeout=0.5))
        except RegistryError:
            failures += 1
    return got, failures


def wait_for(condition: Callable[[], bool], what: str, *consumers: RecordConsumer, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for consumer in consumers:
            consumer.poll_batch(max_records=1, timeout=0.2)


def test_a_retriable_decode_failure_mid_batch_skips_nothing(stack: Any, topic: str) -> None:
    decoder = FlakyDecoder(every=5)
    consumer = RecordConsumer(config(stack), [topic], decoder)
    try:
        got, failures = read_all(consumer, PARTITIONS * PER_PARTITION)
        got.extend(consumer.poll_batch(timeout=1.0) if not failures else [])
    finally:
        consumer.close()
    # Mid-batch failures are returned as a shorter batch, and only one at a batch's first record
    # raises: how many raised depends on how librdkafka split the fetches, so count the decoder's.
    assert decoder.away > 0
    for partition in range(PARTITIONS):
        offsets = [item.offset for item in got if item.partition == partition]
        assert offsets == list(range(PER_PARTITION)), f"partition {partition}: {offsets}"
    assert all(item.record == {"n": int(item.value.split(b"=")[1])} for item in got)


def test_repeated_headers_are_kept_in_order(stack: Any, topic: str) -> None:
    consumer = RecordConsumer(config(stack), [topic])
    try:
        got, _ = read_all(consumer, 1)
    finally:
        consumer.close()
    assert got[0].headers == (("h", b"1"), ("h", b"2"))
    assert got[0].header("h") == b"2" and got[0].header("absent") is None


def test_commits_resume_the_group_and_only_whole_prefixes_commit(stack: Any, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = RecordConsumer(config(stack, group), [topic])
    got, _ = read_all(first, PARTITIONS * PER_PARTITION)
    p0 = [item for item in got if item.partition == 0]
    with pytest.raises(ValueError, match="skip records"):
        first.commit(p0[1:5])  # offset 0 left out
    first.commit(list(reversed(p0[:5])))  # any order, as long as nothing is left out
    first.commit_offsets({(topic, 1): 10})
    with pytest.raises(ValueError):
        first.commit(p0[:5])  # already committed: not the oldest uncommitted any more
    first.close()
    second = RecordConsumer(config(stack, group), [topic])
    try:
        rest, _ = read_all(second, 3 * PER_PARTITION - 15)
    finally:
        second.close()
    starts = {p: min(item.offset for item in rest if item.partition == p) for p in range(PARTITIONS)}
    assert starts == {0: 5, 1: 10, 2: 0}


def test_rebalance_callbacks_and_a_revoked_partition_cannot_be_committed(stack: Any, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: list[tuple[str, list[PartitionKey]]] = []
    first = RecordConsumer(
        config(stack, group),
        [topic],
        on_assign=lambda parts: events.append(("assign", sorted(parts))),
        on_revoke=lambda parts: events.append(("revoke", sorted(parts))),
    )
    got, _ = read_all(first, 1)
    assert events[0] == ("assign", [(topic, p) for p in range(PARTITIONS)])
    assert sorted(first.assignment()) == events[0][1]
    second = RecordConsumer(config(stack, group), [topic])
    try:
        wait_for(lambda: len(first.assignment()) < PARTITIONS, "the second member", first, second)
        moved = [item for item in got if (item.topic, item.partition) not in first.assignment()]
        assert any(kind == "revoke" for kind, _ in events)
        if moved:
            with pytest.raises(CommitError) as error:
                first.commit(moved[:1])
            assert error.value.rebalanced and not error.value.retriable
        gone = next(p for p in range(PARTITIONS) if (topic, p) not in first.assignment())
        with pytest.raises(CommitError) as error:
            first.commit_offsets({(topic, gone): 1})
        assert error.value.rebalanced
    finally:
        second.close()
        first.close()
    with pytest.raises(CommitError):
        first.commit_offsets({(topic, 0): 1})  # closed: nothing is ours


@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_seek_to_beginning_inside_on_assign_replays_committed_records(stack: Any, topic: str, strategy: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = RecordConsumer(config(stack, group, **{"partition.assignment.strategy": strategy}), [topic])
    got, _ = read_all(first, PARTITIONS * PER_PARTITION)
    first.commit(got)
    first.close()
    holder: list[RecordConsumer] = []
    replay = RecordConsumer(
        config(stack, group, **{"partition.assignment.strategy": strategy}),
        [topic],
        on_assign=lambda parts: holder[0].seek_to_beginning(parts),
    )
    holder.append(replay)
    try:
        again, _ = read_all(replay, PARTITIONS * PER_PARTITION)
    finally:
        replay.close()
    assert sorted((item.partition, item.offset) for item in again) == sorted((i.partition, i.offset) for i in got)


def test_pause_resume_seek_and_seek_to_beginning_outside_a_rebalance(stack: Any, topic: str) -> None:
    consumer = RecordConsumer(config(stack), [topic])
    try:
        got, _ = read_all(consumer, PARTITIONS * PER_PARTITION)
        consumer.seek(topic, 1, 15)
        with pytest.raises(ValueError):
            consumer.commit([item for item in got if item.partition == 1])  # 15.. are to be handed out again
        consumer.seek_to_beginning([(topic, 2)])
        consumer.pause([(topic, 2)])
        replayed, _ = read_all(consumer, PER_PARTITION - 15, timeout=10)
        replayed.extend(consumer.poll_batch(timeout=1.0))
        assert sorted((item.partition, item.offset) for item in replayed) == [(1, o) for o in range(15, 20)]
        consumer.resume([(topic, 2)])
        resumed, _ = read_all(consumer, PER_PARTITION)
        assert sorted(item.offset for item in resumed if item.partition == 2) == list(range(PER_PARTITION))
    finally:
        consumer.close()


@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_a_partition_paused_before_a_rebalance_is_fetched_once_assigned_again(
    stack: Any, topic: str, strategy: str
) -> None:
    """librdkafka keeps a partition's pause through an eager rebalance that hands it back to the
    same member, whose on_assign starts it afresh: nothing would ever resume it. Found when two
    Hazelcast persisters stalled on one partition forever."""
    group, settings = f"g-{uuid.uuid4().hex[:8]}", {"partition.assignment.strategy": strategy}
    first = RecordConsumer(config(stack, group, **settings), [topic])
    read_all(first, PARTITIONS * PER_PARTITION)
    first.pause(first.assignment())  # every partition paused, as a sink does with batches waiting
    second = RecordConsumer(config(stack, group, **settings), [topic])
    try:

        def settled() -> bool:  # both hold some, together all: the rebalance is over
            held = [len(first.assignment()), len(second.assignment())]
            return min(held) > 0 and sum(held) == PARTITIONS

        wait_for(settled, "the second member", first, second)
        kept = sorted(first.assignment())
        producer = Producer({"bootstrap.servers": stack.bootstrap})
        for partition in range(PARTITIONS):
            producer.produce(topic, b"n=1000", partition=partition)
        assert producer.flush(10) == 0
        if strategy == "cooperative-sticky":  # kept, never handed over again: still paused, as asked
            assert first.poll_batch(timeout=2.0) == []
            first.resume(kept)
        fetched: set[PartitionKey] = set()
        deadline = time.monotonic() + 20
        while fetched != set(kept) and time.monotonic() < deadline:
            fetched.update((item.topic, item.partition) for item in first.poll_batch(timeout=0.5))
        assert sorted(fetched) == kept
    finally:
        second.close()
        first.close()


def test_a_subscribed_topic_that_appears_later_is_waited_for_not_raised(stack: Any) -> None:
    """Right after a broker restart a topic created a moment ago can be unknown for a while (a
    test met it); a topic created after the subscription is the same case, and deterministic."""
    name = f"test.consumer.later.{uuid.uuid4().hex[:8]}"
    consumer = RecordConsumer(config(stack), [name])
    try:
        assert consumer.poll_batch(timeout=2.0) == []  # librdkafka reports the topic unknown
        ensure_topics({"bootstrap.servers": stack.bootstrap}, {name: 1}, replication=1)
        producer = Producer({"bootstrap.servers": stack.bootstrap})
        producer.produce(name, b"n=1")
        assert producer.flush(10) == 0
        got, _ = read_all(consumer, 1)
        assert [item.value for item in got] == [b"n=1"]
    finally:
        consumer.close()


def test_a_bad_consumer_property_is_a_config_error(stack: Any) -> None:
    with pytest.raises(ConfigError, match=r"no\.such\.property"):
        RecordConsumer(config(stack, **{"no.such.property": "1"}), ["t"])


def test_a_fenced_static_member_rejoins_and_reads_on_from_the_last_commit(stack: Any, topic: str) -> None:
    """A member fenced by Kafka (here by an impostor with its group.instance.id that joins
    and goes away, as the broker does to a member whose session ended during a Kafka pause)
    is replaced, its partitions revoked, and reading goes on from the last commit."""
    group, instance = f"g-{uuid.uuid4().hex[:8]}", f"i-{uuid.uuid4().hex[:8]}"
    static = {"group.instance.id": instance, "session.timeout.ms": 6000}
    assigned: list[list[PartitionKey]] = []
    revoked: list[list[PartitionKey]] = []
    consumer = RecordConsumer(config(stack, group, **static), [topic], on_assign=assigned.append,
                              on_revoke=revoked.append)  # fmt: skip
    try:
        first, _ = read_all(consumer, PARTITIONS * PER_PARTITION)
        consumer.commit(first)
        impostor = Consumer(config(stack, group, **static))
        impostor.subscribe([topic])
        deadline = time.monotonic() + 60
        while not impostor.assignment():  # the broker hands it our membership, and fences us
            assert time.monotonic() < deadline, "the impostor never got the membership"
            impostor.consume(10, 0.2)
        impostor.close()  # a static member sends no LeaveGroup: the broker still holds its id
        produce(stack, topic, PER_PARTITION)
        later: list[ConsumedRecord] = []  # read after the fence (what came before it was not committed)
        deadline = time.monotonic() + 60
        while not revoked or len({(r.partition, r.offset) for r in later}) < PARTITIONS * PER_PARTITION:
            assert time.monotonic() < deadline, f"fenced: {bool(revoked)}, read after it: {len(later)}"
            batch = consumer.poll_batch(max_records=7, timeout=0.5)
            if revoked:
                later.extend(batch)
        assert len(assigned) >= 2, "the new consumer never got the partitions"
    finally:
        consumer.close()
    assert len(first) == PARTITIONS * PER_PARTITION
    again = sorted({(r.partition, r.offset) for r in later})
    assert again == [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION, 2 * PER_PARTITION)], (
        "after the rejoin, exactly the records after the commit are read (none committed before it)"
    )
