"""Writes one partition's batch through the sink and the error policy, until every item is
written, dead-lettered, or the policy stops the persister.

Only the items the store names as failed go through the policy; the others are written.
A store that is away (:class:`StoreUnavailable`) or refuses items only for now (429) is
waited for, without limit and without skipping anything: only a stop ends that wait,
and then nothing is committed (:class:`Abandoned`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

import structlog

from fluxgate_core import deadletter as dlq
from fluxgate_core.backoff import Backoff, sleep_unless
from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.kafka import Headers
from fluxgate_sink import metrics
from fluxgate_sink.errors import PolicyStop, SinkError, StoreUnavailable
from fluxgate_sink.kcql_routing import Routed
from fluxgate_sink.settings import SinkSettings
from fluxgate_sink.sink import ItemFailure, Sink, SinkItem

log = structlog.get_logger(__name__)


class DeadLetters(Protocol):
    """What the writer needs of :class:`fluxgate_core.deadletter.DeadLetterWriter`."""

    async def send(
        self,
        payload: bytes,
        *,
        error: BaseException,
        source: str,
        key: bytes | str | None = None,
        headers: Headers = (),
        described: Headers | None = None,
    ) -> None: ...


class Abandoned(Exception):
    """The service is stopping while the batch could not be written: nothing of it is committed."""


@dataclass(frozen=True, slots=True)
class Refused:
    """A record the store (or routing) refused for good, and where it was going."""

    source: ConsumedRecord
    target: str
    error: BaseException


class BatchWriter:
    """Applies the error policy around :meth:`Sink.write_batch` for one batch at a time."""

    def __init__(
        self,
        sink: Sink,
        dead_letters: DeadLetters,
        settings: SinkSettings,
        stop: asyncio.Event,
        on_store_up: Callable[[bool], None],
    ) -> None:
        self._sink = sink
        self._dead_letters = dead_letters
        self._settings = settings
        self._stop = stop
        self._on_store_up = on_store_up
        self._retry = Backoff.capped(settings.retry_interval_ms / 1000, settings.retry_max_interval_ms / 1000)
        self._outage = Backoff.capped(settings.outage_backoff_ms / 1000, settings.outage_max_backoff_ms / 1000)

    async def write(self, routed: Routed) -> None:
        """Return once every item is written or dead-lettered (and Kafka confirmed the dead letters)."""
        for record in routed.undecodable:  # a record that does not decode always goes to the dead letters
            await self._dead_letter(Refused(record, "", record.error or SinkError("record did not decode")))
        # Writing again cannot route a record that lacks a field: RETRY is out of retries at once.
        unroutable = [Refused(u.source, u.statement.target, u.error) for u in routed.unroutable]
        await self._policy(unroutable, attempt=self._settings.max_retries)
        await self._write_all(list(routed.items))

    async def _write_all(self, pending: list[SinkItem]) -> None:
        attempt = overloaded_rounds = outage = 0
        while pending:
            try:
                failures = await self._timed_write(pending)
            except StoreUnavailable as exc:
                outage = await self._wait_for_store(exc, outage)
                continue
            self._on_store_up(True)
            outage = 0
            _count_written(pending, {f.index for f in failures})
            overloaded = [pending[f.index] for f in failures if f.error.retriable]
            if len(failures) < len(pending):  # some went through: the store is busy, not stuck
                overloaded_rounds = 0
            refused = [(pending[f.index], f.error) for f in failures if not f.error.retriable]
            again = await self._policy([Refused(i.source, i.statement.target, e) for i, e in refused], attempt)
            pending = overloaded + ([item for item, _ in refused] if again else [])
            if not pending:
                return
            if again:
                delay, attempt = self._retry.delay(attempt), attempt + 1
            else:
                delay, overloaded_rounds = self._outage.delay(overloaded_rounds), overloaded_rounds + 1
            await self._pause(delay, pending)

    async def _timed_write(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        started = time.perf_counter()
        metrics.BATCH_SIZE.observe(len(items))
        failures = await self._sink.write_batch(items)
        metrics.WRITE_LATENCY.observe(time.perf_counter() - started)
        return failures

    async def _policy(self, refused: list[Refused], attempt: int) -> bool:
        """NOOP dead-letters (False), THROW stops, RETRY says write them again (True) or stops."""
        if not refused:
            return False
        for item in refused:
            metrics.REJECTED.labels(item.target).inc()
        policy = self._settings.error_policy
        if policy == "NOOP":
            for item in refused:
                await self._dead_letter(item)
            return False
        if policy == "RETRY" and attempt < self._settings.max_retries:
            for item in refused:
                log.warning("sink.retrying", attempt=attempt + 1, **_where(item))
            return True
        raise self._stop_error(refused[0], "THROW" if policy == "THROW" else "RETRY (out of retries)")

    def _stop_error(self, item: Refused, policy: str) -> PolicyStop:
        log.error("sink.stopped_by_policy", policy=policy, **_where(item))
        error = PolicyStop(
            f"{policy}: {item.source.source} -> {item.target}: {type(item.error).__name__}: {item.error}"
        )
        error.__cause__ = item.error
        return error

    async def _dead_letter(self, item: Refused) -> None:
        record = item.source
        coordinates = [
            (dlq.SOURCE_TOPIC, record.topic.encode()),
            (dlq.SOURCE_PARTITION, str(record.partition).encode()),
            (dlq.SOURCE_OFFSET, str(record.offset).encode()),
            (dlq.TARGET, item.target.encode()),
        ]
        await self._dead_letters.send(
            record.value, error=item.error, source=record.source, key=record.key,
            headers=_original_headers(record), described=coordinates,
        )  # fmt: skip
        metrics.DEAD_LETTERED.labels(item.target or record.topic).inc()
        log.warning("sink.dead_lettered", **_where(item))

    async def _wait_for_store(self, exc: StoreUnavailable, outage: int) -> int:
        if outage == 0:
            log.warning("sink.store_unavailable", error=str(exc))
        self._on_store_up(False)
        while True:
            if await sleep_unless(self._stop, self._outage.delay(outage)):
                raise Abandoned(f"stopping while the store is unavailable: {exc}")
            outage += 1
            if await self._ping():
                log.info("sink.store_back", waits=outage)
                return outage

    async def _ping(self) -> bool:
        try:
            return await self._sink.ping()
        except Exception:  # a ping that fails is a store that is still away
            return False

    async def _pause(self, seconds: float, pending: list[SinkItem]) -> None:
        for item in pending:
            metrics.RETRIED.labels(item.statement.target).inc()
        if await sleep_unless(self._stop, seconds):
            raise Abandoned(f"stopping with {len(pending)} records still to write")


def _count_written(items: Sequence[SinkItem], failed: set[int]) -> None:
    """One increment per target, not per item: ``labels()`` costs a lock and a lookup each time."""
    if failed:
        written = Counter(item.statement.target for index, item in enumerate(items) if index not in failed)
    else:  # the usual case: every item, counted in C
        written = Counter(map(_target, items))
    for target, count in written.items():
        metrics.WRITTEN.labels(target).inc(count)


_target = attrgetter("statement.target")


def _original_headers(record: ConsumedRecord) -> list[tuple[str, bytes]]:
    return [(name, value or b"") for name, value in record.headers]


def _where(item: Refused) -> dict[str, object]:
    record = item.source
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "target": item.target,
        "error": str(item.error),
        "error_class": type(item.error).__name__,
    }
