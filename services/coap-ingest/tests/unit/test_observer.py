"""The observer against an in-memory CoAP peer: notifications queued, ends turned into retries,
and cancellation always honoured, however busy the peer is."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import aiocoap

from fluxgate_coap_ingest.observer import Notification, ResourceObserver
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_coap_ingest.settings import ObserveSettings

URI = "coap://127.0.0.1:5683/sensors/dev-1/temperature"


def message(observe: int | None, code: aiocoap.numbers.codes.Code = aiocoap.CONTENT) -> aiocoap.Message:
    return aiocoap.Message(code=code, payload=b'{"temperature": 21.5}', observe=observe, content_format=50)


class Observation:
    """Notifications as fast as the loop runs (``per_item``: how many loop turns each takes), or ``ends``."""

    def __init__(self, count: int | None, per_item: int) -> None:
        self.count, self.per_item, self.cancelled = count, per_item, False

    def cancel(self) -> None:
        self.cancelled = True

    async def __aiter__(self) -> AsyncIterator[aiocoap.Message]:
        observe = 1
        while self.count is None or observe <= self.count:
            for _ in range(self.per_item):
                await asyncio.sleep(0)
            yield message(observe)
            observe += 1


class Peer:
    """What ``aiocoap.Context.request`` returns, for a resource that registers at once."""

    def __init__(self, count: int | None = None, per_item: int = 1, first: aiocoap.Message | None = None) -> None:
        self.count, self.per_item, self.first = count, per_item, first or message(0)
        self.requests = 0
        self.third_request = asyncio.Event()

    def request(self, _: aiocoap.Message, **options: Any) -> Any:
        self.requests += 1
        if self.requests == 3:
            self.third_request.set()
        response: asyncio.Future[aiocoap.Message] = asyncio.get_running_loop().create_future()
        response.set_result(self.first)
        return type("Request", (), {"response": response, "observation": Observation(self.count, self.per_item)})()


def observer(
    peer: Peer, queue: asyncio.Queue[Notification], refusals_too: bool = False, **observe: Any
) -> ResourceObserver:
    settings = ObserveSettings(**{"backoff_initial_s": 0.01, "backoff_max_s": 0.02, **observe})
    return ResourceObserver(
        peer, ResourceSettings(uri=URI), settings, queue, random.Random(1), refusals_too=refusals_too
    )


async def test_notifications_are_queued_in_order_and_an_end_means_registering_again() -> None:
    queue: asyncio.Queue[Notification] = asyncio.Queue()
    peer = Peer(count=3)
    task = asyncio.create_task(observer(peer, queue).run())
    got = [await asyncio.wait_for(queue.get(), 5) for _ in range(8)]
    task.cancel()
    assert [n.observe for n in got] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [n.first_after_register for n in got[:5]] == [True, False, False, False, True]
    assert got[0].payload == b'{"temperature": 21.5}' and got[0].content_format == 50
    assert peer.requests >= 2


async def test_a_refused_registration_is_retried() -> None:
    queue: asyncio.Queue[Notification] = asyncio.Queue()
    peer = Peer(first=message(None, aiocoap.NOT_FOUND))
    watched = observer(peer, queue)
    task = asyncio.create_task(watched.run())
    await asyncio.wait_for(peer.third_request.wait(), 5)
    task.cancel()
    assert queue.empty() and not watched.active


async def test_for_coap_messages_a_refusal_is_handed_on_before_registering_again() -> None:
    queue: asyncio.Queue[Notification] = asyncio.Queue()
    refusal = message(None, aiocoap.SERVICE_UNAVAILABLE)
    peer = Peer(first=refusal)
    task = asyncio.create_task(observer(peer, queue, refusals_too=True).run())
    await asyncio.wait_for(peer.third_request.wait(), 5)
    task.cancel()
    got = [queue.get_nowait() for _ in range(queue.qsize())]
    assert len(got) >= 2 and all(n.message is refusal and n.observe is None for n in got)
    assert all(n.rtt_ms is not None and n.rtt_ms >= 0 for n in got)


async def test_every_notification_carries_its_message() -> None:
    queue: asyncio.Queue[Notification] = asyncio.Queue()
    task = asyncio.create_task(observer(Peer(count=2), queue).run())
    got = [await asyncio.wait_for(queue.get(), 5) for _ in range(3)]
    task.cancel()
    assert [n.message.opt.observe for n in got if n.message is not None] == [0, 1, 2]


async def test_cancel_always_stops_it_even_while_notifications_pour_in() -> None:
    # CPython 3.11's wait_for() could swallow a cancel that lands as the awaited item completes;
    # the service's stop() then waited for a task that never ended.
    for per_item in range(1, 6):
        for delay in range(40):
            queue: asyncio.Queue[Notification] = asyncio.Queue()
            task = asyncio.create_task(observer(Peer(per_item=per_item), queue).run())
            for _ in range(delay):
                await asyncio.sleep(0)
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=1)
            assert task in done, f"observer ignored its cancel (per_item={per_item}, after {delay} turns)"
