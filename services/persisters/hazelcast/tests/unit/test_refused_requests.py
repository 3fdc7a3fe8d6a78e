"""A request the cluster refuses as a whole over one item: that item fails alone (issue 35)."""

from __future__ import annotations

from typing import Any

import pytest
from hazelcast import errors as hz
from hazelcast_store import aggregate, item, statement

from fluxgate_hazelcast_persister.settings import ConnectionSettings
from fluxgate_hazelcast_persister.sink import HazelcastSink
from fluxgate_sink.errors import SinkError
from fluxgate_sink.sink import ItemFailure


class RefusingQueue:
    """Refuses every ``add_all`` holding a poison value; can drop the connection after some calls."""

    name = "q"

    def __init__(self, refusal: Exception, away_after: int | None = None) -> None:
        self.refusal, self.away_after = refusal, away_after
        self.held: list[bytes] = []
        self.calls = 0

    async def add_all(self, values: list[Any]) -> bool:
        self.calls += 1
        if self.away_after is not None and self.calls > self.away_after:
            raise hz.TargetDisconnectedError("member left")
        if any(b"poison" in bytes(v.buffer) for v in values):
            raise self.refusal
        self.held.extend(bytes(v.buffer) for v in values)
        return True


class FakeClient:
    def __init__(self, queue: RefusingQueue) -> None:
        self.queue = queue
        self.offsets: dict[str, int] = {}

    async def get_queue(self, name: str) -> RefusingQueue:
        return self.queue

    get_ringbuffer = get_reliable_topic = get_queue  # never called: the batch is a queue's

    async def get_map(self, name: str) -> Any:
        client = self

        class Offsets:
            async def get_all(self, keys: list[str]) -> dict[str, int]:
                return {k: v for k, v in client.offsets.items() if k in keys}

            async def put_all(self, entries: dict[str, int]) -> None:
                client.offsets.update(entries)

        return Offsets()


async def written(queue: RefusingQueue, away_after: int | None = None) -> tuple[list[ItemFailure], FakeClient]:
    queue.away_after = away_after
    client = FakeClient(queue)

    async def connect(_: ConnectionSettings) -> FakeClient:
        return client

    sink = HazelcastSink(ConnectionSettings(), "g", connect)
    stmt = statement("q", "QUEUE")
    await sink.setup([stmt])
    batch = [item(stmt, aggregate(n, n, unit="poison" if n in (5, 23) else "Cel"), n) for n in range(32)]
    return await sink.write_batch(batch), client


async def test_the_items_refused_alone_fail_and_the_others_are_written_in_order() -> None:
    queue = RefusingQueue(hz.IllegalArgumentError("a value the member refuses"))
    failures, client = await written(queue)
    assert [(f.index, f.error.retriable) for f in failures] == [(5, False), (23, False)]
    assert all("a value the member refuses" in str(f.error) for f in failures)
    devices = [value.split(b'"device_id":"')[1].split(b'"')[0].decode() for value in queue.held]
    assert devices == [f"d{n}" for n in range(32) if n not in (5, 23)]
    (through,) = client.offsets.values()
    assert through == 4  # the record stays below the first refusal until its dead letter is committed


async def test_the_store_going_away_while_halving_leaves_the_rest_to_write_again() -> None:
    """Calls: the 32 refused, 0-15 refused, 0-7 refused, 0-3 written, 4-7 refused, 4-5 refused,
    then the member is away: 4 onwards is written again later, the refusal found again then."""
    queue = RefusingQueue(hz.IllegalArgumentError("refused"))
    failures, _ = await written(queue, away_after=6)
    assert [(f.index, f.error.retriable) for f in failures] == [(n, True) for n in range(4, 32)]
    assert len(queue.held) == 4


async def test_a_refusal_of_the_client_itself_is_not_split_and_stops() -> None:
    """Permissions are no item's fault: nothing is dead-lettered over them, the persister stops."""
    queue = RefusingQueue(hz.AccessControlError("not allowed"))
    with pytest.raises(SinkError, match="AccessControlError") as raised:
        await written(queue)
    assert not raised.value.retriable
    assert queue.calls == 1
