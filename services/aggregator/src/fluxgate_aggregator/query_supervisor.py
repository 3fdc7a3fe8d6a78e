"""The driver's loop between batches: restart failed queries, look for new writer schemas."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import structlog
from prometheus_client import Counter
from pyspark.sql.streaming.query import StreamingQuery

from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.settings import AggregatorSettings
from fluxgate_core.errors import RegistryError

log = structlog.get_logger(__name__)
RESTARTS = Counter("fluxgate_aggregator_query_restarts_total", "Failed streaming queries resumed from their checkpoint")


@dataclass
class Supervisor:
    settings: AggregatorSettings
    state: JobState
    restarts: int = 0
    checked_at: float = field(default_factory=time.monotonic)
    # One turn at a time: a schema change must not restart queries a tick is restarting.
    _turn: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def run(self, stop: threading.Event, interval_s: float = 1.0) -> bool:
        """Tick every ``interval_s`` until ``stop``; False when the queries kept failing."""
        while not stop.wait(interval_s):
            if not self.tick():
                return False
        return True

    def tick(self) -> bool:
        """One look at the queries; False when they keep failing and the job should exit."""
        with self._turn:
            return self._tick()

    def _tick(self) -> bool:
        failed = self.state.failed()
        if failed and self.restarts >= self.settings.max_query_restarts:
            log.error("aggregator.query_failed", errors={q.name: str(q.exception()) for q in failed})
            return False
        for query in failed:
            self.restarts += 1
            self._restart(query)
        if time.monotonic() - self.checked_at >= self.settings.schema_refresh_seconds:
            self.checked_at = time.monotonic()
            self.follow_writers()
        return True

    def _restart(self, query: StreamingQuery) -> None:
        """Resume a failed query from its checkpoint. Its last batch is committed before Spark
        reports progress, so a failure while reporting (SPARK-55271: Kafka source metrics in
        4.1.1 throw on the first batch after a restart) or a transient Kafka error costs one
        restart, not the job."""
        error = str(query.exception())
        log.warning("aggregator.query_restarting", name=query.name, error=error, attempt=self.restarts)
        RESTARTS.inc()
        time.sleep(min(2.0**self.restarts, 30.0))
        self.state.restart(query)

    def follow_writers(self) -> None:
        """Learn the versions registered since the last look, so that the batch that meets
        one need not ask the registry itself (it would: see :mod:`fluxgate_aggregator.writers`).
        Each batch plans its decoding anew: the query runs on, no restart."""
        writers = self.state.writers
        if writers is None:
            return
        try:
            new = writers.refresh()
        except RegistryError as exc:
            log.warning("aggregator.registry_unreachable", error=str(exc))
            return
        if new:
            log.info("aggregator.new_writer_schemas", topic=self.settings.input_topic, ids=new)
