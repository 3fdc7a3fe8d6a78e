"""At most ``limit`` statements in flight over every batch at once, like the driver's
``execute_concurrent`` but shared by the batches of all partitions and awaitable.

A statement's completion (on the driver's event-loop thread) starts the next queued one
right there, so the asyncio loop is woken once per batch, not once per statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol


class Session(Protocol):
    """What the pump needs of ``cassandra.cluster.Session``."""

    def execute_async(self, query: Any, parameters: Any = None, trace: bool = False, timeout: Any = ...) -> Any: ...


class _Batch:
    """One awaited group of statements: the error of each (None: written)."""

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop) -> None:
        self.errors: list[BaseException | None] = [None] * size
        self.remaining = size
        self.done: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._lock = threading.Lock()

    def finish(self, index: int, error: BaseException | None) -> None:
        self.errors[index] = error
        with self._lock:
            self.remaining -= 1
            last = self.remaining == 0
        if last:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody awaits this batch any more
                self._loop.call_soon_threadsafe(_resolve, self.done)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled write: its statements still ran to the end
        future.set_result(None)


class Pump:
    """Runs statements through ``session.execute_async`` with a bounded number in flight."""

    def __init__(self, session: Session, limit: int, timeout: float) -> None:
        self._session = session
        self._timeout = timeout
        self._free = limit
        self._queue: deque[tuple[_Batch, int, Any]] = deque()
        self._lock = threading.Lock()
        self._local = threading.local()

    async def run(self, statements: Sequence[Any]) -> list[BaseException | None]:
        """Execute every statement; return, in order, the exception each one failed with, or None."""
        if not statements:
            return []
        batch = _Batch(len(statements), asyncio.get_running_loop())
        with self._lock:
            self._queue.extend((batch, index, statement) for index, statement in enumerate(statements))
            starts = min(self._free, len(self._queue))
            self._free -= starts
        self._start(starts)
        await batch.done
        return batch.errors

    def _start(self, count: int) -> None:
        """Start ``count`` queued statements (their slots are taken). A statement that completes
        synchronously hands its slot back through ``_released`` instead of recursing."""
        local = self._local
        if getattr(local, "starting", False):  # called from a completion inside our own loop
            local.handed_back += count
            return
        local.starting, local.handed_back = True, 0
        try:
            while count:
                count -= 1
                with self._lock:
                    job = self._queue.popleft() if self._queue else None
                    if job is None:
                        self._free += 1 + count  # nothing queued: give every remaining slot back
                        count = 0
                        continue
                self._execute(*job)
                count, local.handed_back = count + local.handed_back, 0
        finally:
            local.starting = False

    def _execute(self, batch: _Batch, index: int, statement: Any) -> None:
        try:
            future = self._session.execute_async(statement, timeout=self._timeout)
        except Exception as exc:  # refused before it was sent (no routing key, no connection ...)
            self._completed(exc, batch, index)
            return
        future.add_callbacks(self._written, self._failed, callback_args=(batch, index), errback_args=(batch, index))

    def _written(self, _rows: Any, batch: _Batch, index: int) -> None:
        self._completed(None, batch, index)

    def _failed(self, error: BaseException, batch: _Batch, index: int) -> None:
        self._completed(error, batch, index)

    def _completed(self, error: BaseException | None, batch: _Batch, index: int) -> None:
        batch.finish(index, error)
        self._start(1)  # this statement's slot goes to the next queued one
