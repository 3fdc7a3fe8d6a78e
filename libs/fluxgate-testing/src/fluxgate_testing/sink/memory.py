"""In-memory stand-ins for Kafka, the store and the dead-letter topic (unit tests only)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import SerializationError
from fluxgate_core.kafka import Headers
from fluxgate_sink.errors import SinkError, StoreUnavailable
from fluxgate_sink.kcql import Statement
from fluxgate_sink.sink import ItemFailure, Sink, SinkItem

TP = tuple[str, int]
START = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


async def until(done: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for a condition the fakes change (they have no events to wait on)."""
    async with asyncio.timeout(timeout):
        while True:  # the fakes have no event to wait on (ASYNC110): poll
            if done():
                return
            await asyncio.sleep(0.005)


def aggregate(device: str, minute: int, **extra: Any) -> dict[str, Any]:
    return {"device_id": device, "metric": "temperature", "window_start": START + timedelta(minutes=minute), **extra}


def record(topic: str, partition: int, offset: int, value: dict[str, Any] | None) -> ConsumedRecord:
    error = SerializationError("unknown magic byte 7") if value is None else None
    return ConsumedRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        key=b"k",
        value=b"\x07raw" if value is None else repr(value).encode(),
        headers=(("trace", b"1"), ("trace", b"2")),
        timestamp_ms=0,
        record=value,
        error=error,
    )


class FakeSource:
    """Partitions of records; assigns them all at the first poll; remembers commits and pauses."""

    def __init__(
        self,
        records: Sequence[ConsumedRecord],
        on_assign: Callable[[list[TP]], None],
        on_revoke: Callable[[list[TP]], None],
    ) -> None:
        self.pending = list(records)
        self.all = list(records)
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.assigned: list[TP] = []
        self.paused: set[TP] = set()
        self.commits: list[dict[TP, int]] = []
        self.closed = False
        self.revoke_after_polls: tuple[int, list[TP]] | None = None
        self.polls = 0

    def poll_batch(self, max_records: int = 500, timeout: float = 1.0) -> list[ConsumedRecord]:
        self.polls += 1
        if not self.assigned:
            self.assigned = sorted({(r.topic, r.partition) for r in self.pending})
            self.on_assign(list(self.assigned))
        if self.revoke_after_polls and self.polls >= self.revoke_after_polls[0]:
            _, gone = self.revoke_after_polls
            self.revoke_after_polls = None
            self.on_revoke(gone)
            self.assigned = [tp for tp in self.assigned if tp not in gone]
        out = [
            r
            for r in self.pending
            if (r.topic, r.partition) in self.assigned and (r.topic, r.partition) not in self.paused
        ][:max_records]
        taken = {id(r) for r in out}
        self.pending = [r for r in self.pending if id(r) not in taken]
        return out

    def commit_offsets(self, offsets: Mapping[TP, int]) -> None:
        self.commits.append(dict(offsets))

    def committed(self, tp: TP) -> int | None:
        ends = [c[tp] for c in self.commits if tp in c]
        return max(ends) if ends else None

    def high_watermark(self, topic: str, partition: int) -> int | None:
        offsets = [r.offset for r in self.all if (r.topic, r.partition) == (topic, partition)]
        return max(offsets) + 1 if offsets else None

    def pause(self, partitions: Sequence[TP]) -> None:
        self.paused.update(partitions)

    def resume(self, partitions: Sequence[TP]) -> None:
        self.paused.difference_update(partitions)

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeSink(Sink):
    """A dict per target. ``refuse`` names ids refused for good; ``overloaded`` ids refused once (429);
    ``down`` makes every write raise StoreUnavailable."""

    name: str = "memory"
    docs: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    refuse: set[str] = field(default_factory=set)
    refuse_times: int = 1_000_000
    overloaded: set[str] = field(default_factory=set)
    down: bool = False
    writes: int = 0
    pings: int = 0
    batches: list[int] = field(default_factory=list)
    closed: int = 0

    async def setup(self, statements: Sequence[Statement]) -> None:
        for statement in statements:
            self.docs.setdefault(statement.target, {})

    async def write_batch(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        self.writes += 1
        if self.down:
            raise StoreUnavailable("connection refused")
        self.batches.append(len(items))
        failures: list[ItemFailure] = []
        for index, item in enumerate(items):
            if item.id in self.overloaded:
                self.overloaded.discard(item.id)
                failures.append(ItemFailure(index, SinkError("429 overloaded", retriable=True)))
            elif item.id in self.refuse and self.refuse_times > 0:
                self.refuse_times -= 1
                failures.append(ItemFailure(index, SinkError("mapper_parsing_exception: not a double")))
            else:
                self.docs.setdefault(item.target, {})[item.id] = item.document
        return failures

    async def ping(self) -> bool:
        self.pings += 1
        return not self.down

    async def close(self) -> None:
        self.closed += 1


@dataclass
class FakeDeadLetters:
    sent: list[tuple[bytes, BaseException, str, list[tuple[str, bytes]]]] = field(default_factory=list)

    async def send(
        self,
        payload: bytes,
        *,
        error: BaseException,
        source: str,
        key: bytes | str | None = None,
        headers: Headers = (),
        described: Headers | None = None,
    ) -> None:
        """Records the headers as the real writer sends them: the input's, then the caller's own."""
        every = [*headers, *(described or ())]
        self.sent.append(
            (payload, error, source, [(k, v.encode() if isinstance(v, str) else bytes(v or b"")) for k, v in every])
        )
