"""What the stores hold now, asked directly: Elasticsearch documents per daily index, Scylla
rows in the recent days' partitions (``scylla_store``), Hazelcast structure sizes
(``hazelcast_store``), and the newest aggregate visible in each.

Every store is asked on its own, with a timeout: a store away is that store's error, with
the time it was asked, and the rest of the page renders."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import httpx


@dataclass(frozen=True)
class Held:
    """One thing a store holds: an index, a partition set or a structure, and how much."""

    name: str
    count: int
    kind: str = "documents"
    detail: str = ""


@dataclass(frozen=True)
class StoreView:
    name: str
    at: float
    holds: list[Held] = field(default_factory=list)
    newest: dict[str, Any] | None = None
    error: str | None = None
    meaning: str = ""  # what the figures are (and are not), said on the page

    @property
    def total(self) -> int:
        return sum(held.count for held in self.holds)

    def as_json(self) -> dict[str, Any]:
        fields = ("name", "at", "newest", "error", "meaning")
        return {**{name: getattr(self, name) for name in fields}, "holds": [asdict(h) for h in self.holds]}


def failed(name: str, at: float, exc: BaseException) -> StoreView:
    return StoreView(name, at, error=f"{type(exc).__name__}: {exc}"[:300])


def plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row or document with JSON's types only (dates as ISO-8601), for the page and its JSON."""
    return {str(k): _plain_value(v) for k, v in row.items()}


def _plain_value(value: Any) -> Any:
    if isinstance(value, datetime):  # the driver's timestamps are naive UTC
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class BlockingStore:
    """A store whose client blocks: each ask runs in a thread, bounded by ``timeout_s``.

    A thread cannot be cancelled, so an ask still running when the next refresh comes is
    not doubled: that refresh says the store has not answered, with the first ask's time.
    An answer is kept for ``every_s`` (its age shown on the page) when an ask costs the
    store more than a refresh is worth; an error is asked again at the next refresh."""

    def __init__(self, name: str, ask: Callable[[], StoreView], timeout_s: float, every_s: float = 0.0) -> None:
        self.name, self._ask, self._timeout_s, self._every_s = name, ask, timeout_s, every_s
        self._running: asyncio.Future[StoreView] | None = None
        self._since = 0.0

    async def view(self) -> StoreView:
        if self._running is None or (self._running.done() and not self._fresh(self._running.result())):
            self._since = time.time()
            self._running = asyncio.ensure_future(asyncio.to_thread(self._guarded))
        try:
            return await asyncio.wait_for(asyncio.shield(self._running), self._timeout_s)
        except TimeoutError:
            return StoreView(self.name, self._since, error=f"no answer in {self._timeout_s:g}s")

    def _fresh(self, answer: StoreView) -> bool:
        return answer.error is None and time.time() - self._since < self._every_s

    def _guarded(self) -> StoreView:
        at = time.time()
        try:
            return self._ask()
        except Exception as exc:  # the driver's errors are many; each is this store's answer, not the page's
            return failed(self.name, at, exc)


async def elasticsearch(client: httpx.AsyncClient, hosts: list[str], alias: str) -> StoreView:
    """Documents per index behind ``alias`` and the newest aggregate (by ``window_start``),
    from the first of ``hosts`` that answers."""
    at = time.time()
    try:
        indices = await _es_get(client, hosts, f"_cat/indices/{alias}", {"format": "json", "h": "index,docs.count"})
        if indices.status_code == 404:
            return StoreView("elasticsearch", at, error=f"no index behind {alias} yet")
        indices.raise_for_status()
        rows = indices.json()
        holds = sorted((Held(str(r["index"]), int(r.get("docs.count") or 0)) for r in rows), key=lambda h: h.name)
        found = await _es_get(client, hosts, f"{alias}/_search", {"size": 1, "sort": "window_start:desc"})
        found.raise_for_status()
        hits = found.json().get("hits", {}).get("hits", [])
        newest = plain(hits[0]["_source"]) if hits else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return failed("elasticsearch", at, exc)
    meaning = f"documents per index behind {alias}; newest by window_start"
    return StoreView("elasticsearch", at, holds, newest, meaning=meaning)


async def _es_get(client: httpx.AsyncClient, hosts: list[str], path: str, params: dict[str, Any]) -> httpx.Response:
    """GET ``path`` from each host in turn until one is reached (the persister's nodes are
    one cluster: any answers for all); the last host's transport error when none is."""
    for host in hosts[:-1]:
        try:
            return await client.get(f"{host.rstrip('/')}/{path}", params=params)
        except httpx.TransportError:
            continue
    return await client.get(f"{hosts[-1].rstrip('/')}/{path}", params=params)
