"""What the stores hold now, asked directly: Elasticsearch documents per daily index and the
newest aggregate behind the alias. (Scylla and Hazelcast are shown through their persisters'
figures: written, store up.)"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass(frozen=True)
class StoreView:
    name: str
    at: float
    holds: list[tuple[str, int]] = field(default_factory=list)  # (index or structure, count)
    newest: dict[str, Any] | None = None
    error: str | None = None

    @property
    def total(self) -> int:
        return sum(count for _, count in self.holds)


async def elasticsearch(client: httpx.AsyncClient, url: str, alias: str) -> StoreView:
    """Documents per index behind ``alias`` and the newest aggregate (by ``window_start``)."""
    at = time.time()
    base = url.rstrip("/")
    try:
        indices = await client.get(f"{base}/_cat/indices/{alias}", params={"format": "json", "h": "index,docs.count"})
        if indices.status_code == 404:
            return StoreView("elasticsearch", at, error=f"no index behind {alias} yet")
        indices.raise_for_status()
        holds = sorted((str(row["index"]), int(row.get("docs.count") or 0)) for row in indices.json())
        found = await client.get(f"{base}/{alias}/_search", params={"size": 1, "sort": "window_start:desc"})
        found.raise_for_status()
        hits = found.json().get("hits", {}).get("hits", [])
        newest = hits[0].get("_source") if hits else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return StoreView("elasticsearch", at, error=f"{type(exc).__name__}: {exc}"[:300])
    return StoreView("elasticsearch", at, holds, newest)
