"""The driver's loop between batches: restart failed queries, follow new writer schemas."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field

import structlog
from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from fluxgate_aggregator.contracts import Contracts, writer_schemas
from fluxgate_aggregator.job import start
from fluxgate_aggregator.settings import AggregatorSettings
from fluxgate_aggregator.state import JobState
from fluxgate_core.errors import RegistryError
from fluxgate_core.serde import value_subject

log = structlog.get_logger(__name__)


@dataclass
class Supervisor:
    spark: SparkSession
    settings: AggregatorSettings
    client: SchemaRegistryClient
    contracts: Contracts
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
        time.sleep(min(2.0**self.restarts, 30.0))
        self.state.restart(query)

    def follow_writers(self) -> None:
        """Decoding is planned per writer schema id, so a gateway that registers a new
        version needs new plans: stop both queries and start them again from their
        checkpoints. Records with the new id read before that are dead-lettered with
        the reason (their bytes kept), never dropped."""
        with self._turn:
            self._follow_writers()

    def _follow_writers(self) -> None:
        subject = value_subject(self.settings.input_topic)
        try:
            writers = writer_schemas(self.client, subject)
        except RegistryError as exc:
            log.warning("aggregator.registry_unreachable", error=str(exc))
            return
        new = sorted(set(writers) - set(self.contracts.writers))
        if not new:
            return
        log.info("aggregator.new_writer_schemas", subject=subject, ids=new)
        for query in self.state.queries:
            query.stop()
        self.contracts = dataclasses.replace(self.contracts, writers=writers)
        start(self.spark, self.settings, self.contracts, self.state)
