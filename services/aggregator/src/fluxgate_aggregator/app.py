"""``fluxgate-aggregator run`` (the job) and ``fluxgate-aggregator prefetch`` (warm the jar cache).

Exit codes of ``run``: 0 after a clean stop (SIGTERM/SIGINT), 2 for bad configuration
(before Spark starts; Kafka refusing the credentials or access to a topic or the progress
group too), 1 when no Kafka broker answered, the registry failed or the queries kept failing.
"""

from __future__ import annotations

import asyncio
import threading
import time

import structlog
import typer

from fluxgate_aggregator.connectors import resolve_jars
from fluxgate_aggregator.contracts import load_contracts
from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.job import start
from fluxgate_aggregator.kafka_access import verify_group
from fluxgate_aggregator.losses import KafkaWatermarks, LossWatch
from fluxgate_aggregator.progress import ProgressListener
from fluxgate_aggregator.progress_commits import ProgressCommitter
from fluxgate_aggregator.query_supervisor import Supervisor
from fluxgate_aggregator.settings import ENV_PREFIX, SERVICE, AggregatorSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_core.errors import FluxgateError
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.lifecycle import run_service
from fluxgate_core.registry_access import registrations_named, verify_registry
from fluxgate_core.serde import registry_client
from fluxgate_core.settings import load_settings

cli = typer.Typer(help=__doc__, add_completion=False, no_args_is_help=True)
log = structlog.get_logger(__name__)
CHATTY_LOGGERS = ("py4j", "httpx", "httpx2")
SERVICE_CLIENT_ID = "fluxgate-aggregator"


class QueriesFailed(FluxgateError):
    """The streaming queries kept failing after every restart the settings allow."""


class AggregatorJob:
    """The streaming job as a service: Spark's driver loop is blocking, so it runs in a
    thread, stopped through a ``threading.Event`` that mirrors the service's ``stop``."""

    def __init__(self, settings: AggregatorSettings) -> None:
        self.settings = settings
        self._state: JobState | None = None

    def ready(self) -> bool:
        """Every streaming query is running (while :meth:`attention` reports lost input offsets,
        ``/readyz`` says 503 too, each reason a failing check of its own)."""
        state = self._state
        return state is not None and all(query.isActive for query in state.queries)

    def attention(self) -> list[str]:
        """Why the job is degraded although it runs: input offsets lost before they were read."""
        state = self._state
        return state.losses.active() if state is not None and state.losses is not None else []

    async def run(self, stop: asyncio.Event) -> None:
        halt = threading.Event()
        mirror = asyncio.create_task(_mirror(stop, halt))
        try:
            finished = await asyncio.to_thread(self.serve, halt)
        finally:
            halt.set()
            mirror.cancel()
        if not finished:
            raise QueriesFailed(f"the queries kept failing after {self.settings.max_query_restarts} restarts")

    def serve(self, stop: threading.Event) -> bool:
        """Start the queries and block until ``stop``, then stop them gracefully; False when
        they kept failing."""
        settings = self.settings
        # Wrong credentials, a CA that does not verify, a topic or the progress group out of the
        # principal's reach stop the job here, named (exit 2), not in Spark's retries behind "ready".
        verify_kafka(settings.kafka, SERVICE_CLIENT_ID, ENV_PREFIX, topics=job_topics(settings))
        if settings.progress_group:
            verify_group(settings.kafka, ENV_PREFIX, settings.progress_group)
        verify_registry(settings.registry, ENV_PREFIX)  # a refused secret or CA: named, before Spark starts
        client = registry_client(settings.registry)
        with registrations_named(settings.registry, ENV_PREFIX):  # its output schema: a readonly client, named
            contracts = load_contracts(
                client, settings.input_topic, settings.output_topic, settings.registry.compatibility
            )
        building = time.monotonic()
        spark = build_session(settings.spark)
        # A start's cost, split: the JVM and the session here, the first batch in query.first_batch.
        session_s = round(time.monotonic() - building, 3)
        watermarks = KafkaWatermarks(settings)
        state = JobState(losses=LossWatch(watermarks, settings.data_loss_alert_seconds))
        committer = ProgressCommitter(settings) if settings.progress_group else None
        spark.streams.addListener(ProgressListener(state, committer))
        try:
            start(spark, settings, contracts, state)
            self._state = state
            window = settings.window.size
            log.info("aggregator.started", input=settings.input_topic, output=settings.output_topic, window=window,
                     session_s=session_s)  # fmt: skip
            return Supervisor(settings, state).run(stop)
        finally:
            for query in state.queries:
                query.stop()
            spark.stop()
            if state.ledger is not None:
                state.ledger.close()
            watermarks.close()
            if committer is not None:
                committer.close()


def job_topics(settings: AggregatorSettings) -> list[str]:
    """The topics the job reads and writes."""
    topics = [settings.input_topic, settings.output_topic, settings.deadletter_topic]
    return [*topics, settings.late_topic] if settings.late_topic else topics


async def _mirror(stop: asyncio.Event, halt: threading.Event) -> None:
    await stop.wait()
    halt.set()


@cli.command()
def run() -> None:
    """Run the streaming job until SIGTERM/SIGINT; exit 2 on bad configuration, 1 on failure."""
    raise typer.Exit(run_service(SERVICE, AggregatorSettings, AggregatorJob, quiet_loggers=CHATTY_LOGGERS))


@cli.command()
def prefetch() -> None:
    """Resolve the Kafka and Avro connectors once (Maven, into ``jars_dir``) so later starts are offline."""
    for jar in resolve_jars(load_settings(AggregatorSettings).spark.jars_dir):
        typer.echo(f"resolved {jar}")
