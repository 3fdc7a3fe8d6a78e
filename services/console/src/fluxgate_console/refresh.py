"""The console's state: refreshed every ``refresh_s`` from the services, Kafka and the
stores, each part on its own (one failing part is that part's error, never the page's)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx
import structlog

from fluxgate_console import metrics
from fluxgate_console.deadletters import DeadLetterBook
from fluxgate_console.kafka_state import KafkaAnswers, KafkaState, kafka_state
from fluxgate_console.reader import DeadLetterReader
from fluxgate_console.scrape import History, InstanceState, scrape_all
from fluxgate_console.settings import ConsoleSettings
from fluxgate_console.store_clients import elasticsearch_options, store_askers
from fluxgate_console.stores import StoreView, elasticsearch
from fluxgate_console.view import Alert, ServiceView, clock_alerts, record_history, service_views

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """Everything the page shows, each part with its own time."""

    at: float
    services: list[ServiceView] = field(default_factory=list)
    kafka: KafkaState = field(default_factory=lambda: KafkaState(0.0, error="not asked yet"))
    topic_rates: Mapping[str, float | None] = field(default_factory=dict)
    stores: list[StoreView] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)

    @property
    def failing(self) -> int:
        services = sum(1 for s in self.services if s.state != "ready")
        groups = sum(1 for g in self.kafka.groups.values() if g.error)
        stores = sum(1 for s in self.stores if s.error)
        return services + groups + (self.kafka.error is not None) + stores + len(self.alerts)


class Console:
    """Holds the newest :class:`Snapshot`; :meth:`refresh` makes the next one."""

    def __init__(
        self,
        settings: ConsoleSettings,
        kafka: KafkaAnswers,
        book: DeadLetterBook,
        reader: DeadLetterReader | None = None,
        client: httpx.AsyncClient | None = None,
        es_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.settings = settings
        self.book = book
        self.reader = reader
        self._kafka = kafka
        self._client = client or httpx.AsyncClient(timeout=settings.request_timeout_s)
        es = settings.elasticsearch
        self._es = es_client or httpx.AsyncClient(**elasticsearch_options(es, settings.request_timeout_s))
        self._history = History(settings.rate_window_s)
        self._askers, self._closers = store_askers(settings)
        self.snapshot = Snapshot(time.time(), service_views(settings.services, {}, Snapshot(0).kafka, self._history))

    @property
    def es_client(self) -> httpx.AsyncClient:
        """The client that asks Elasticsearch, with its CA and credentials."""
        return self._es

    async def refresh(self) -> Snapshot:
        started = time.monotonic()
        services = self.settings.services
        urls = [url for service in services for url in service.urls]
        instances, kafka, stores = await asyncio.gather(
            scrape_all(self._client, urls), self._ask_kafka(), self._stores()
        )
        for instance in instances.values():
            metrics.SCRAPES.labels(instance.state).inc()
        record_history(self._history, services, instances, kafka)
        now, views = time.time(), service_views(services, instances, kafka, self._history)
        limits = self.settings.attention
        self.snapshot = Snapshot(
            now,
            views,
            kafka,
            {topic: self._history.rate(f"topic:{topic}") for topic in sorted(kafka.ends)},
            stores,
            clock_alerts(views, now, limits.clock_ahead_s, limits.late_share),
        )
        metrics.PARTS_FAILING.set(self.snapshot.failing)
        metrics.REFRESH_SECONDS.observe(time.monotonic() - started)
        return self.snapshot

    async def _ask_kafka(self) -> KafkaState:
        services = self.settings.services
        topics = {t for s in services for t in (*s.inputs, *s.outputs)} | set(self.settings.deadletters.topics)
        groups = {s.group: s.inputs for s in services if s.group}
        try:
            # the admin calls are bounded themselves; this bounds the lot, Kafka slow or not
            return await asyncio.wait_for(
                asyncio.to_thread(kafka_state, self._kafka, topics, groups), self.settings.request_timeout_s * 4
            )
        except TimeoutError:
            return KafkaState(time.time(), error="Kafka: no answer in time")

    async def _stores(self) -> list[StoreView]:
        asked = [asker.view() for asker in self._askers]
        es = self.settings.elasticsearch
        if es.hosts:
            asked.insert(0, elasticsearch(self._es, es.hosts, es.alias))
        return list(await asyncio.gather(*asked))

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh until ``stop``; a refresh that raises is logged and the next one tried."""
        while not stop.is_set():
            try:
                await self.refresh()
            except Exception:  # a bug in one refresh must not stop the page from refreshing
                log.exception("console.refresh_failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.settings.refresh_s)

    def ready(self) -> bool:
        """Ready once Kafka answered the last refresh."""
        return self.snapshot.kafka.error is None and self.snapshot.kafka.at > 0

    async def close(self) -> None:
        await self._client.aclose()
        await self._es.aclose()
        for close in self._closers:
            await asyncio.to_thread(close)


def instances_of(snapshot: Snapshot) -> dict[str, InstanceState]:
    return {i.url: i for view in snapshot.services for i in view.instances}
