"""Retention: delete (or close) the dated indices whose date, read from the NAME, is too old.

The name, not the creation date: a replay of last month's aggregates creates last
month's index today, and it is as old as its data. Only names that match a family's
pattern exactly are candidates; ``temperatures-old-stuff`` or another prefix's indices
are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import structlog
from elastic_transport import TransportError
from elasticsearch import ApiError, AsyncElasticsearch

from fluxgate_es_persister.mapping import IndexFamily
from fluxgate_es_persister.settings import RetentionSettings

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Expired:
    index: str
    dated: date


def expired_indices(names: Iterable[str], families: Sequence[IndexFamily], today: date, days: int) -> list[Expired]:
    """The names dated before ``today - days`` in one of ``families``; everything else is kept."""
    cutoff = today - timedelta(days=days)
    expired = []
    for name in sorted(set(names)):
        for family in families:
            dated = family.date_of(name)
            if dated is not None:
                if dated < cutoff:
                    expired.append(Expired(name, dated))
                break
    return expired


class Retention:
    """Sweeps the families' indices every ``interval_s``; a failed sweep is logged and tried again later."""

    def __init__(
        self,
        client: AsyncElasticsearch,
        families: Sequence[IndexFamily],
        settings: RetentionSettings,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._client = client
        self._families = [family for family in families if family.daily]
        self._settings = settings
        self._clock = clock

    async def sweep(self) -> list[Expired]:
        """One pass: list, choose, delete or close; returns what it expired."""
        if not self._families:
            return []
        open_state = await self._list()
        expired = expired_indices(open_state, self._families, self._clock().date(), self._settings.days)
        done = []
        for old in expired:
            if self._settings.action == "close" and not open_state[old.index]:
                continue  # closed by an earlier sweep
            await self._expire(old)
            done.append(old)
        return done

    async def _list(self) -> dict[str, bool]:
        """Index name -> open, for every index under the families' wildcards (closed ones too)."""
        patterns = ",".join(sorted({family.wildcard for family in self._families}))
        rows = await self._client.cat.indices(
            index=patterns, format="json", h="index,status", expand_wildcards="open,closed"
        )
        listed: list[dict[str, Any]] = rows.body if isinstance(rows.body, list) else []
        return {str(row["index"]): row.get("status") != "close" for row in listed}

    async def _expire(self, old: Expired) -> None:
        if self._settings.action == "close":
            await self._client.indices.close(index=old.index)
        else:
            await self._client.indices.delete(index=old.index)
        log.info(
            "retention.expired",
            index=old.index,
            dated=old.dated.isoformat(),
            action=self._settings.action,
            days=self._settings.days,
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep now and every ``interval_s`` until ``stop``; a task for ``SinkRunner(tasks=[...])``."""
        while not stop.is_set():
            try:
                await self.sweep()
            except (TransportError, ApiError) as exc:
                log.warning("retention.failed", error=str(exc), error_class=type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.interval_s):
                    await stop.wait()
