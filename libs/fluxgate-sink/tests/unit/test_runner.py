"""The runner against an in-memory source, sink and dead-letter topic: commits, policies, outages."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fluxgate_testing.sink.memory import FakeDeadLetters, FakeSink, FakeSource, aggregate, record, until

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import FluxgateError
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_sink import metrics
from fluxgate_sink import runner as runner_module
from fluxgate_sink.errors import PolicyStop
from fluxgate_sink.formats import ConnectJsonDecoder
from fluxgate_sink.runner import SinkRunner
from fluxgate_sink.settings import SinkSettings
from fluxgate_sink.sink import ItemFailure, SinkItem

KCQL = "INSERT INTO temps SELECT * FROM aggs"
ID0 = "dev-0|temperature|1795435200000"  # device, metric, window start in epoch ms


class Harness:
    def __init__(self, records: Sequence[ConsumedRecord], sink: FakeSink | None = None, **options: Any) -> None:
        self.sink = sink or FakeSink()
        self.dead = FakeDeadLetters()
        self.source: FakeSource | None = None
        options = {"kcql": KCQL, "batch_age_ms": 0, "retry_interval_ms": 1, "outage_backoff_ms": 1, **options}
        self.runner = SinkRunner(
            "test",
            self.sink,
            kafka=KafkaSettings(),
            registry=RegistrySettings(),
            settings=SinkSettings(**options),
            source_factory=self._source(records),
            dead_letters=self.dead,
        )
        self.stop = asyncio.Event()

    def _source(self, records: Sequence[ConsumedRecord]) -> Any:
        def build(topics: list[str], on_assign: Any, on_revoke: Any) -> FakeSource:
            self.source = FakeSource(records, on_assign, on_revoke)
            return self.source

        return build

    async def run_until(self, done: Callable[[], bool], timeout: float = 5.0) -> None:
        task = asyncio.create_task(self.runner.run(self.stop))
        await until(lambda: done() or task.done(), timeout)
        self.stop.set()
        await task

    def committed(self, partition: int) -> int | None:
        return self.source.committed(("aggs", partition)) if self.source else None


def batch(count: int, partition: int = 0, first: int = 0) -> list[ConsumedRecord]:
    return [record("aggs", partition, first + i, aggregate(f"dev-{i}", 0)) for i in range(count)]


async def test_writes_every_record_and_commits_past_the_last() -> None:
    h = Harness(batch(5, 0) + batch(3, 1, first=10))
    await h.run_until(lambda: h.committed(0) == 5 and h.committed(1) == 13)
    assert len(h.sink.docs["temps"]) == 5  # partition 1 repeats dev-0..2: same ids, one document each
    assert h.sink.docs["temps"][ID0]["device_id"] == "dev-0"
    assert h.dead.sent == []
    assert h.source is not None and h.source.closed and h.sink.closed == 1


async def test_lag_is_what_kafka_holds_past_the_commit() -> None:
    h = Harness(batch(6), batch_size=4, batch_age_ms=60_000)  # the last 2 wait: nothing makes them due
    await h.run_until(lambda: h.committed(0) == 4 and metrics.LAG.labels("aggs", "0")._value.get() == 2, 10)


async def test_batches_per_partition_by_size() -> None:
    h = Harness(batch(10), batch_size=4)
    await h.run_until(lambda: h.committed(0) == 10)
    assert h.sink.batches == [4, 4, 2]


async def test_a_replay_changes_nothing() -> None:
    sink = FakeSink()
    first = Harness(batch(6), sink=sink)
    await first.run_until(lambda: first.committed(0) == 6)
    before = {t: dict(d) for t, d in sink.docs.items()}
    again = Harness(batch(6), sink=sink)
    await again.run_until(lambda: again.committed(0) == 6)
    assert sink.docs == before


@pytest.mark.parametrize("policy", ["NOOP", "THROW", "RETRY"])
async def test_a_record_that_does_not_decode_is_always_dead_lettered(policy: str) -> None:
    records = [*batch(2), record("aggs", 0, 2, None), *batch(1, first=3)]
    h = Harness(records, error_policy=policy)
    await h.run_until(lambda: h.committed(0) == 4)
    [(payload, error, source, headers)] = h.dead.sent
    assert payload == b"\x07raw" and "magic byte" in str(error) and source == "aggs/0/2"
    assert ("fluxgate.dlq.offset", b"2") in headers and ("fluxgate.dlq.topic", b"aggs") in headers
    assert [v for k, v in headers if k == "trace"] == [b"1", b"2"]  # repeated original headers kept


def json_record(offset: int, value: bytes) -> ConsumedRecord:
    """A JSON value through the decoder as the consumer hands it out: decoded, or with its error."""
    try:
        decoded, error = ConnectJsonDecoder(schemas_enable=False).decode(value), None
    except FluxgateError as exc:
        decoded, error = None, exc
    return ConsumedRecord("aggs", 0, offset, b"dev-0", value, (), 0, decoded, error)


async def test_a_json_value_that_does_not_decode_is_dead_lettered_with_its_reason() -> None:
    good = b'{"device_id": "dev-0", "metric": "temperature", "window_start": 1795435200000}'
    h = Harness([json_record(0, good), json_record(1, b'{"device_id": '), json_record(2, good)])
    await h.run_until(lambda: h.committed(0) == 3)
    assert h.sink.docs["temps"][ID0]["window_start"] == 1795435200000  # epoch millis, dated like Avro's
    [(payload, error, source, _)] = h.dead.sent
    assert payload == b'{"device_id": ' and str(error).startswith("not JSON: ") and source == "aggs/0/1"


async def test_transforms_run_before_routing_a_filtered_record_is_committed_a_failed_one_dead_lettered() -> None:
    good = b'{"device_id": "dev-0", "metric": "temperature", "window_start": 1795435200000, "drop": false}'
    chain = [
        {"name": "drop", "type": "org.apache.kafka.connect.transforms.Filter",
         "predicate": {"name": "h", "type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
                       "config": {"name": "skip"}}},
        {"name": "topic", "type": "org.apache.kafka.connect.transforms.InsertField$Value",
         "config": {"topic.field": "source_topic"}},
        {"name": "ts", "type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
         "config": {"field": "seen", "target.type": "unix"}},
    ]  # fmt: skip
    skipped = json_record(1, good)._replace(headers=(("skip", b""),))
    seen = json_record(2, good.replace(b'"drop"', b'"seen": [1], "drop"'))
    h = Harness([json_record(0, good), skipped, seen], transforms=chain, value_format="json")
    await h.run_until(lambda: h.committed(0) == 3)
    assert h.sink.docs["temps"][ID0]["source_topic"] == "aggs" and len(h.sink.docs["temps"]) == 1
    [(payload, error, source, _)] = h.dead.sent
    assert (
        payload == seen.value
        and source == "aggs/0/2"
        and str(error) == "transforms.ts: a list is not a timestamp (a Timestamp, unix integer or text)"
    )


async def test_noop_dead_letters_the_refused_item_and_writes_the_rest() -> None:
    sink = FakeSink(refuse={ID0})
    h = Harness(batch(4), sink=sink, error_policy="NOOP")
    await h.run_until(lambda: h.committed(0) == 4)
    assert ID0 not in sink.docs["temps"] and len(sink.docs["temps"]) == 3
    [(_, error, source, headers)] = h.dead.sent
    assert source == "aggs/0/0" and "mapper_parsing_exception" in str(error)
    assert ("fluxgate.dlq.target", b"temps") in headers and ("fluxgate.dlq.partition", b"0") in headers


async def test_throw_stops_and_commits_nothing_of_the_failed_batch() -> None:
    sink = FakeSink(refuse={"dev-2|temperature|1795435200000"})
    h = Harness(batch(3) + batch(3, partition=1, first=0), sink=sink, error_policy="THROW", batch_size=3)
    with pytest.raises(PolicyStop, match=r"THROW: aggs/\d/2 -> temps: SinkError: mapper_parsing"):
        await h.run_until(lambda: False)
    assert h.dead.sent == []
    assert h.committed(0) is None or h.committed(1) is None  # at least the failing partition: never


async def test_retry_retries_then_stops_like_throw() -> None:
    sink = FakeSink(refuse={ID0})
    h = Harness(batch(2), sink=sink, error_policy="RETRY", max_retries=3)
    with pytest.raises(PolicyStop, match="RETRY \\(out of retries\\): aggs/0/0"):
        await h.run_until(lambda: False)
    assert sink.writes == 4  # the first write and three retries of the refused item
    assert h.committed(0) is None


async def test_retry_succeeds_when_the_store_takes_it_later() -> None:
    sink = FakeSink(refuse={ID0}, refuse_times=2)
    h = Harness(batch(2), sink=sink, error_policy="RETRY", max_retries=5)
    await h.run_until(lambda: h.committed(0) == 2)
    assert ID0 in sink.docs["temps"] and h.dead.sent == []


async def test_overloaded_items_are_written_again_whatever_the_policy() -> None:
    sink = FakeSink(overloaded={ID0})
    h = Harness(batch(3), sink=sink, error_policy="THROW")
    await h.run_until(lambda: h.committed(0) == 3)
    assert len(sink.docs["temps"]) == 3 and sink.writes == 2


async def test_the_store_shows_up_once_set_up_before_any_write() -> None:
    metrics.STORE_UP.set(0)  # as a fresh process has it
    h = Harness([])
    task = asyncio.create_task(h.runner.run(h.stop))
    await until(lambda: metrics.STORE_UP._value.get() == 1)
    h.stop.set()
    await task


async def test_store_down_pauses_keeps_the_batch_and_resumes() -> None:
    sink = FakeSink(down=True)
    h = Harness(batch(8), sink=sink, batch_size=2, poll_max_records=8)
    task = asyncio.create_task(h.runner.run(h.stop))
    await until(lambda: sink.pings >= 5)
    assert not h.runner.ready() and metrics.STORE_UP._value.get() == 0
    assert h.committed(0) is None and h.source is not None and ("aggs", 0) in h.source.paused
    sink.down = False
    await until(lambda: h.committed(0) == 8)
    assert h.runner.ready() and len(sink.docs["temps"]) == 8 and ("aggs", 0) not in h.source.paused
    h.stop.set()
    await task


async def test_stop_while_the_store_is_down_commits_nothing() -> None:
    sink = FakeSink(down=True)
    h = Harness(batch(3), sink=sink)
    await h.run_until(lambda: sink.pings >= 2)
    assert h.committed(0) is None and h.source is not None and h.source.closed


async def test_stop_finishes_the_batch_in_hand() -> None:
    h = Harness(batch(5), batch_age_ms=60_000)  # nothing is due until the stop drains it
    await h.run_until(lambda: h.source is not None and not h.source.pending)
    assert h.committed(0) == 5 and len(h.sink.docs["temps"]) == 5


async def test_records_of_a_revoked_partition_are_never_committed() -> None:
    h = Harness(batch(4) + batch(4, partition=1), batch_age_ms=60_000)
    task = asyncio.create_task(h.runner.run(h.stop))
    await until(lambda: h.source is not None)
    assert h.source is not None
    h.source.revoke_after_polls = (h.source.polls + 1, [("aggs", 1)])
    await until(lambda: h.source is not None and h.source.revoke_after_polls is None)
    h.stop.set()
    await task
    assert h.committed(0) == 4 and h.committed(1) is None


async def test_a_record_without_its_pk_field_goes_through_the_policy() -> None:
    records = [record("aggs", 0, 0, {"device_id": "d", "metric": "temperature"})]  # no window start
    h = Harness(records, error_policy="NOOP", kcql=f"{KCQL} PK device_id, window_start")
    await h.run_until(lambda: h.committed(0) == 1)
    [(_, error, source, _)] = h.dead.sent
    assert source == "aggs/0/0" and "window_start" in str(error)


async def test_a_daily_index_needs_the_event_time() -> None:
    records = [record("aggs", 0, 0, {"device_id": "d", "metric": "temperature"})]
    h = Harness(records, error_policy="NOOP", kcql=f"{KCQL} WITHINDEXSUFFIX=-{{YYYY.MM.dd}}")
    await h.run_until(lambda: h.committed(0) == 1)
    [(_, error, _, _)] = h.dead.sent
    assert "no event time" in str(error)  # never dated by the Kafka timestamp or the wall clock


async def test_a_record_without_key_fields_is_keyed_by_its_kafka_coordinates() -> None:
    plain = {"sensor_id": "s1", "temperature": 21.5}  # the seed's ringbuffer statement reads such records
    h = Harness([record("aggs", 0, 7, plain)], kcql="INSERT INTO ring SELECT sensor_id, temperature FROM aggs")
    await h.run_until(lambda: h.committed(0) == 8)
    assert h.sink.docs["ring"] == {"aggs/0/7": plain} and h.dead.sent == []


class OrderedSink(FakeSink):
    """Remembers every item written, in the order written, with its partition and offset."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[int, int]] = []

    async def write_batch(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        self.order.extend((item.source.partition, item.source.offset) for item in items)
        return await super().write_batch(items)


async def _run_recording_polls(records: list[ConsumedRecord], limit: int) -> tuple[Harness, list[tuple[bool, float]]]:
    """Run to the last commit; each poll as (on the event loop's thread, its timeout)."""
    polls: list[tuple[bool, float]] = []
    loop_thread = threading.get_ident()
    h = Harness(records, sink=OrderedSink(), batch_size=3, poll_max_records=limit, batch_age_ms=0)
    build = h.runner._source_factory

    def recording(topics: list[str], on_assign: Any, on_revoke: Any) -> Any:
        source = build(topics, on_assign, on_revoke)
        poll = source.poll_batch

        def poll_batch(max_records: int = 500, timeout: float = 1.0) -> list[ConsumedRecord]:
            polls.append((threading.get_ident() == loop_thread, timeout))
            return poll(max_records, timeout)

        source.poll_batch = poll_batch  # type: ignore[method-assign]
        return source

    h.runner._source_factory = recording
    await h.run_until(lambda: h.committed(0) == 20 and h.committed(1) == 12)
    return h, polls


async def test_polls_after_a_full_one_run_on_the_loop_and_change_nothing() -> None:
    """The backlog path (a full poll, then polls on the loop's thread without waiting) writes
    and commits exactly what the waiting path (every poll on a thread) does, in the same order."""
    ones, twos = batch(20), batch(12, partition=1)
    records = [r for pair in zip(ones, twos, strict=False) for r in pair] + ones[12:]  # partitions interleaved
    waiting, polls_waiting = await _run_recording_polls(records, limit=1000)  # never full: always a thread
    backlog, polls_backlog = await _run_recording_polls(records, limit=4)
    assert not any(here for here, _ in polls_waiting)
    assert (True, 0.0) in polls_backlog  # the fast path ran, without waiting
    assert all(timeout > 0 for here, timeout in polls_backlog if not here)
    assert backlog.sink.docs == waiting.sink.docs
    for partition, count in ((0, 20), (1, 12)):  # record order is per partition; partitions interleave
        expected = list(range(count))
        assert [o for p, o in backlog.sink.order if p == partition] == expected
        assert [o for p, o in waiting.sink.order if p == partition] == expected
        for h in (backlog, waiting):  # batches differ with the poll size; commits only move forward, to the end
            commits = _commits(h, partition)
            assert commits == sorted(set(commits)) and commits[-1] == count


def _commits(h: Harness, partition: int) -> list[int]:
    assert h.source is not None
    return [c[("aggs", partition)] for c in h.source.commits if ("aggs", partition) in c]


class SlowSink(FakeSink):
    """Each write takes ``seconds`` (a store that takes writes, slowly)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def write_batch(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        await asyncio.sleep(self.seconds)
        return await super().write_batch(items)


def _pauses_of(h: Harness) -> list[list[tuple[str, int]]]:
    """Every pause call the runner makes on the source (recorded by wrapping its factory)."""
    pauses: list[list[tuple[str, int]]] = []
    build = h.runner._source_factory

    def recording(topics: list[str], on_assign: Any, on_revoke: Any) -> Any:
        source = build(topics, on_assign, on_revoke)
        pause = source.pause

        def paused(partitions: Sequence[tuple[str, int]]) -> None:
            pauses.append(list(partitions))
            pause(partitions)

        source.pause = paused  # type: ignore[method-assign]
        return source

    h.runner._source_factory = recording
    return pauses


async def test_a_full_partition_whose_write_ends_soon_is_not_paused() -> None:
    """Full (a batch writing, three waiting): the runner waits for the write instead of polling and
    pausing, which would make librdkafka drop what it prefetched for the partition."""
    h = Harness(batch(40), sink=SlowSink(0.01), batch_size=2, poll_max_records=8)
    pauses = _pauses_of(h)
    await h.run_until(lambda: h.committed(0) == 40)
    assert pauses == []
    assert len(h.sink.docs["temps"]) == 40 and sum(h.sink.batches) == 40


async def test_a_partition_full_for_longer_is_paused_then_resumed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "PAUSE_AFTER_S", 0.1)
    h = Harness(batch(16), sink=SlowSink(0.4), batch_size=2, poll_max_records=8)
    pauses = _pauses_of(h)
    task = asyncio.create_task(h.runner.run(h.stop))
    await until(lambda: bool(pauses))
    assert h.source is not None and ("aggs", 0) in h.source.paused and h.committed(0) is None
    await until(lambda: h.committed(0) == 16, timeout=10)
    assert ("aggs", 0) not in h.source.paused
    h.stop.set()
    await task


class HeldGauge:
    """Stands in for ``metrics.HELD``: every value the runner reports."""

    def __init__(self) -> None:
        self.values: list[int] = []

    def set(self, value: int) -> None:
        self.values.append(value)


def _spread(partitions: int, each: int) -> list[ConsumedRecord]:
    """``each`` records on every one of ``partitions``, interleaved as Kafka hands several out."""
    return [record("aggs", p, i, aggregate(f"dev-{i}", 0)) for i in range(each) for p in range(partitions)]


async def test_the_process_holds_no_more_than_its_bound_whatever_its_partitions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """48 partitions, each allowed a batch writing and three waiting (16 records): without a bound
    for the process it would hold all 240. With ``max_held_records`` 8 it holds at most that and
    two polls (the one that crossed it, and one more before the pause), pauses every partition,
    not only those holding records (the others' records would come in a poll at a time), and
    still writes everything once."""
    monkeypatch.setattr(runner_module, "PAUSE_AFTER_S", 0.02)
    held = HeldGauge()
    monkeypatch.setattr(runner_module.metrics, "HELD", held)
    h = Harness(_spread(48, 5), sink=SlowSink(0.1), batch_size=4, poll_max_records=8, max_held_records=8)
    pauses = _pauses_of(h)
    await h.run_until(lambda: all(h.committed(p) == 5 for p in range(48)), timeout=30)
    assert max(held.values) <= 8 + 2 * 8
    assert pauses and h.source is not None and h.source.paused == set()
    assert len(h.sink.docs["temps"]) == 5 and sum(h.sink.batches) == 48 * 5


async def test_without_a_process_bound_the_same_partitions_hold_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control of the test above: the same records, the default bound, and the process holds
    far more than 8 + 2 * 8 (so the test above measures the bound, not the scenario)."""
    monkeypatch.setattr(runner_module, "PAUSE_AFTER_S", 0.02)
    held = HeldGauge()
    monkeypatch.setattr(runner_module.metrics, "HELD", held)
    h = Harness(_spread(48, 5), sink=SlowSink(0.2), batch_size=4, poll_max_records=8)
    await h.run_until(lambda: all(h.committed(p) == 5 for p in range(48)), timeout=30)
    assert max(held.values) > 8 + 2 * 8


async def test_past_its_bound_a_partition_writes_what_it_holds_without_waiting_for_its_batch() -> None:
    """A batch not full waits for ``batch_age``; past the process's bound it is written at once,
    so a paused partition never sits out a long ``batch_age`` holding records."""
    h = Harness(batch(5), batch_size=100, batch_age_ms=600_000, max_held_records=4)
    await h.run_until(lambda: h.committed(0) == 5)
    assert h.sink.batches == [5]


def _consumer_config(monkeypatch: pytest.MonkeyPatch, kafka: KafkaSettings, **options: Any) -> dict[str, Any]:
    """The librdkafka configuration the runner gives its consumer."""
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(runner_module, "RecordConsumer", lambda config, *_, **__: made.append(config))
    settings = SinkSettings(kcql=KCQL, value_format="json", **options)
    sink_runner = SinkRunner("test", FakeSink(), kafka=kafka, registry=RegistrySettings(), settings=settings)
    sink_runner._kafka_source(["aggs"], lambda _: None, lambda _: None)
    return made[0]


def test_librdkafka_prefetches_at_most_prefetch_kbytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own default (64 MiB of payload) let a persister prefetch ~400 MiB on 24 partitions."""
    assert _consumer_config(monkeypatch, KafkaSettings())["queued.max.messages.kbytes"] == 4096
    config = _consumer_config(monkeypatch, KafkaSettings(), prefetch_kbytes=2048)
    assert config["queued.max.messages.kbytes"] == 2048


def test_a_full_prefetch_queue_is_fetched_for_again_within_10_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka's default (fetch.queue.backoff.ms, 1 s) held a consumer capped at 4 MiB to
    ~6,000 records/s of 2 KB, against ~207,000 at 10 ms (bench/prefetch.py)."""
    assert _consumer_config(monkeypatch, KafkaSettings())["fetch.queue.backoff.ms"] == 10
    kafka = KafkaSettings(extra={"fetch.queue.backoff.ms": "50"})
    assert _consumer_config(monkeypatch, kafka)["fetch.queue.backoff.ms"] == "50"


def test_the_kafka_extra_properties_win_over_prefetch_kbytes(monkeypatch: pytest.MonkeyPatch) -> None:
    kafka = KafkaSettings(extra={"queued.max.messages.kbytes": "1024"})
    assert _consumer_config(monkeypatch, kafka)["queued.max.messages.kbytes"] == "1024"
