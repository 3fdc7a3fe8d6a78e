"""``HazelcastSink`` against a real member: order, keys, backpressure, the offset record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hazelcast import errors as hz_errors
from hazelcast.asyncio import HazelcastClient
from hazelcast.config import IndexType
from hazelcast_store import aggregate, item, items, statement

from fluxgate_hazelcast_persister.settings import ConnectionSettings
from fluxgate_hazelcast_persister.sink import HazelcastSink

pytestmark = pytest.mark.integration
GROUP = "sink-tests"


@pytest.fixture
async def sink(hz_member: Any) -> AsyncIterator[HazelcastSink]:
    settings = ConnectionSettings(
        members=[hz_member.address], cluster_name=hz_member.cluster_name, queue_offer_timeout_ms=200
    )
    hz_sink = HazelcastSink(settings, GROUP)
    yield hz_sink
    await hz_sink.close()


async def test_a_ringbuffer_reads_back_in_order_and_a_repeated_batch_is_skipped(
    sink: HazelcastSink, hz: HazelcastClient, name: str
) -> None:
    stmt = statement(name)
    await sink.setup([stmt])
    batch = items(stmt, 1500)
    assert await sink.write_batch(batch) == []
    assert await sink.write_batch(batch[1000:]) == []  # the runner repeating the tail after a crash
    ringbuffer = await hz.get_ringbuffer(name)
    assert await ringbuffer.size() == 1500
    read = list(await ringbuffer.read_many(0, 500, 500))
    first = json.loads(read[0].to_string())
    assert first["device_id"] == "d0" and first["window_start"] == "2026-11-23T12:00:00+00:00"
    assert [json.loads(v.to_string())["window_start"] for v in read] == [
        i.document["window_start"].isoformat() for i in batch[:500]
    ]


async def test_a_queue_reads_back_in_order(sink: HazelcastSink, hz: HazelcastClient, name: str) -> None:
    stmt = statement(name, "QUEUE")
    await sink.setup([stmt])
    batch = items(stmt, 120)
    assert await sink.write_batch(batch) == []
    queue = await hz.get_queue(name)
    drained: list[Any] = []
    await queue.drain_to(drained)
    assert [json.loads(v.to_string())["device_id"] for v in drained] == [i.document["device_id"] for i in batch]


async def test_a_full_bounded_queue_is_backpressure_never_a_drop(
    sink: HazelcastSink, hz: HazelcastClient, name: str
) -> None:
    bounded = f"bounded-{name}"  # the stack's member caps queues named bounded-* (100 items)
    stmt = statement(bounded, "QUEUE")
    await sink.setup([stmt])
    batch = items(stmt, 250)
    failures = await sink.write_batch(batch)
    queue = await hz.get_queue(bounded)
    held = await queue.size()
    assert 0 < held < 250 and [f.index for f in failures] == list(range(held, 250))
    assert all(f.error.retriable for f in failures)
    drained: list[Any] = []
    pending = [batch[f.index] for f in failures]
    while pending:  # a reader makes room; the runner writes what was not taken again
        await queue.drain_to(drained)
        pending = [pending[f.index] for f in await sink.write_batch(pending)]
    await queue.drain_to(drained)
    assert [json.loads(v.to_string())["window_start"] for v in drained] == [
        i.document["window_start"].isoformat() for i in batch
    ]


async def test_an_imap_holds_one_entry_per_key_after_a_replay(
    sink: HazelcastSink, hz: HazelcastClient, name: str
) -> None:
    stmt = statement(name, "IMAP", "PK device_id, metric, window_start")
    await sink.setup([stmt])
    batch = items(stmt, 300)
    assert await sink.write_batch(batch) == []
    assert await sink.write_batch(batch) == []
    imap = await hz.get_map(name)
    assert await imap.size() == 300
    stored = await imap.get("d3|temperature|1795435380000")
    assert json.loads(stored.to_string())["device_id"] == "d3"


async def test_imap_ttl_expires_entries(sink: HazelcastSink, hz: HazelcastClient, name: str) -> None:
    """The entry is written, then expires. Seen through the member's own events, not a read
    racing the 1 s TTL (a loaded machine can take longer than that between write and read)."""
    stmt = statement(name, "IMAP", "TTL=1")
    await sink.setup([stmt])
    imap = await hz.get_map(name)
    added: asyncio.Queue[Any] = asyncio.Queue()
    await imap.add_entry_listener(added_func=lambda event: added.put_nowait(event.key))
    assert await sink.write_batch([item(stmt, aggregate(1, 0), 0)]) == []
    key = "d1|temperature|1795435200000"
    assert await asyncio.wait_for(added.get(), timeout=30) == key
    for _ in range(300):  # expired after 1 s; how much later a read sees it depends on the load
        if await imap.get(key) is None:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{key} still there 30 s after it was written with TTL=1")


async def test_a_reliable_topic_publishes_in_order(sink: HazelcastSink, hz: HazelcastClient, name: str) -> None:
    stmt = statement(name, "RELIABLE_TOPIC")
    await sink.setup([stmt])
    received: list[str] = []
    topic = await hz.get_reliable_topic(name)
    await topic.add_listener(lambda message: received.append(json.loads(message.message.to_string())["device_id"]))
    batch = items(stmt, 50)
    assert await sink.write_batch(batch) == []
    for _ in range(50):
        if len(received) == 50:
            break
        await asyncio.sleep(0.1)
    assert received == [i.document["device_id"] for i in batch]


async def test_avro_passes_the_consumed_bytes_through(sink: HazelcastSink, hz: HazelcastClient, name: str) -> None:
    stmt = statement(name, "RING_BUFFER", "WITHFORMAT AVRO")
    await sink.setup([stmt])
    framed = b"\x00\x00\x00\x00\x07avro body \xff\xfe\x80"  # an Avro body is binary, not UTF-8
    assert await sink.write_batch([item(stmt, aggregate(1, 0), 0, value=framed)]) == []
    ringbuffer = await hz.get_ringbuffer(name)
    assert await ringbuffer.read_one(0) == framed
    # A byte[] (the client's BYTE_ARRAY type), which any client reads, not a Python-only pickle.
    [stored] = await ringbuffer.read_many(0, 1, 1)
    assert type(stored) is bytearray


async def test_a_map_request_refused_for_one_entry_fails_that_entry_alone(
    sink: HazelcastSink, hz: HazelcastClient, name: str
) -> None:
    """The member refuses a whole ``put_all`` request over one entry: here a sorted index on
    ``count`` (numbers) and one document whose ``count`` is a string (a ClassCastException
    on the member). That entry fails alone, for good, naming the cause; the others are written."""
    imap = await hz.get_map(name)
    await imap.add_index(attributes=["count"], index_type=IndexType.SORTED)
    stmt = statement(name, "IMAP")
    await sink.setup([stmt])
    batch = [item(stmt, aggregate(n, n, count="three" if n == 29 else n), n) for n in range(60)]
    failures = await sink.write_batch(batch)
    assert [(f.index, f.error.retriable) for f in failures] == [(29, False)]
    assert "ClassCast" in str(failures[0].error)
    # The member keeps the entry it failed to index, as it does for a single put: the refusal
    # (and its dead letter) is what tells; every other entry is written.
    assert {i.id for n, i in enumerate(batch) if n != 29} <= set(await imap.key_set())


async def test_a_queue_request_refused_for_one_value_fails_that_value_alone_in_order(
    sink: HazelcastSink, hz: HazelcastClient, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An appending structure: the items around the one refused keep their order."""
    stmt = statement(name, "QUEUE")
    await sink.setup([stmt])
    queue = await hz.get_queue(name)
    real = type(queue).add_all

    async def refusing(self: Any, values: list[Any]) -> bool:
        if any(b"poison" in bytes(v.buffer) for v in values):
            raise hz_errors.IllegalArgumentError("refused: a poison value")
        return bool(await real(self, values))

    monkeypatch.setattr(type(queue), "add_all", refusing)
    batch = [item(stmt, aggregate(n, n, unit="poison" if n == 7 else "Cel"), n) for n in range(40)]
    failures = await sink.write_batch(batch)
    assert [(f.index, f.error.retriable) for f in failures] == [(7, False)]
    assert "poison" in str(failures[0].error)
    drained: list[Any] = []
    await queue.drain_to(drained)
    assert [json.loads(v.to_string())["device_id"] for v in drained] == [
        i.document["device_id"] for n, i in enumerate(batch) if n != 7
    ]
