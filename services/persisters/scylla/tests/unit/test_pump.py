"""The pump keeps at most ``limit`` statements in flight over all batches, and reports each one's fate."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from fluxgate_scylla_persister.pump import Pump


class FakeFuture:
    def __init__(self) -> None:
        self._callbacks: tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...], tuple[Any, ...]] | None = None
        self._outcome: tuple[bool, Any] | None = None
        self._lock = threading.Lock()

    def add_callbacks(
        self, callback: Callable[..., Any], errback: Callable[..., Any], callback_args: Any, errback_args: Any
    ) -> None:
        with self._lock:
            self._callbacks = (callback, errback, callback_args, errback_args)
            outcome = self._outcome
        if outcome is not None:
            self._fire(*outcome)

    def complete(self, ok: bool, value: Any) -> None:
        with self._lock:
            self._outcome = (ok, value)
            ready = self._callbacks is not None
        if ready:
            self._fire(ok, value)

    def _fire(self, ok: bool, value: Any) -> None:
        assert self._callbacks is not None
        callback, errback, callback_args, errback_args = self._callbacks
        if ok:
            callback(value, *callback_args)
        else:
            errback(value, *errback_args)


class FakeSession:
    """Completes statements on a background thread (like the driver's event loop), or at once."""

    def __init__(self, synchronous: bool = False) -> None:
        self.synchronous = synchronous
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()

    def execute_async(self, query: Any, parameters: Any = None, trace: bool = False, timeout: Any = None) -> Any:
        if query == "refused":
            raise ValueError("no routing key")
        future = FakeFuture()
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        ok = not str(query).startswith("bad")
        if self.synchronous:
            self._done(future, ok, query)
        else:
            threading.Timer(0.001, self._done, (future, ok, query)).start()
        return future

    def _done(self, future: FakeFuture, ok: bool, query: Any) -> None:
        with self.lock:
            self.in_flight -= 1
        future.complete(ok, None if ok else RuntimeError(f"failed {query}"))


async def test_errors_come_back_in_order_and_the_bound_holds_over_concurrent_batches() -> None:
    session = FakeSession()
    pump = Pump(session, limit=8, timeout=1.0)
    first = [f"a{i}" for i in range(200)] + ["bad-a"]
    second = ["refused", *[f"b{i}" for i in range(150)], "bad-b"]
    one, two = await asyncio.gather(pump.run(first), pump.run(second))
    assert [i for i, e in enumerate(one) if e is not None] == [200]
    assert str(one[200]) == "failed bad-a"
    assert isinstance(two[0], ValueError) and str(two[-1]) == "failed bad-b"
    assert sum(e is not None for e in two) == 2
    assert session.most_in_flight <= 8
    assert session.in_flight == 0


async def test_thousands_of_synchronous_completions_do_not_recurse() -> None:
    session = FakeSession(synchronous=True)
    pump = Pump(session, limit=4, timeout=1.0)
    errors = await pump.run([f"bad{i}" for i in range(5000)])
    assert len(errors) == 5000 and all(isinstance(e, RuntimeError) for e in errors)
    assert await pump.run(["ok"] * 10) == [None] * 10  # every slot was handed back


async def test_an_empty_batch() -> None:
    assert await Pump(FakeSession(), limit=1, timeout=1.0).run([]) == []
