"""``fluxgate-aggregator run`` (the job) and ``fluxgate-aggregator prefetch`` (warm the jar cache)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

import structlog
import typer
from pyspark.sql.streaming.query import StreamingQuery

from fluxgate_aggregator.connectors import resolve_jars
from fluxgate_aggregator.contracts import load_contracts
from fluxgate_aggregator.job import JobState, start
from fluxgate_aggregator.progress import ProgressListener
from fluxgate_aggregator.settings import SERVICE, AggregatorSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.health import HealthServer
from fluxgate_core.logs import configure_logging
from fluxgate_core.serde import registry_client
from fluxgate_core.settings import load_settings

cli = typer.Typer(help=__doc__, add_completion=False, no_args_is_help=True)
log = structlog.get_logger(__name__)


@cli.command()
def run() -> None:
    """Run the streaming job until SIGTERM/SIGINT; exit 2 on bad configuration, 1 on failure."""
    try:
        settings = load_settings(AggregatorSettings)
    except ConfigError as exc:
        print(f"aggregator: configuration error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from exc
    configure_logging(SERVICE, settings.log)
    for chatty in ("py4j", "httpx", "httpx2"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        code = serve(settings)
    except FluxgateError as exc:
        log.error("aggregator.failed", error=str(exc), error_class=type(exc).__name__)
        code = 1
    raise typer.Exit(code)


def serve(settings: AggregatorSettings, stop: threading.Event | None = None) -> int:
    """Start the queries and block until ``stop`` (or a signal), then stop them gracefully."""
    stop = stop or _signal_event()
    contracts = load_contracts(
        registry_client(settings.registry), settings.input_topic, settings.output_topic, settings.registry.compatibility
    )
    spark = build_session(settings.spark)
    state = JobState()
    spark.streams.addListener(ProgressListener(state))
    start(spark, settings, contracts, state)
    health = HealthServer(settings.http, {"queries": lambda: all(q.isActive for q in state.queries)}).start()
    log.info(
        "aggregator.started", input=settings.input_topic, output=settings.output_topic, window=settings.window.size
    )
    try:
        restarts = 0
        while not stop.wait(1.0):
            failed = state.failed()
            if failed and restarts >= settings.max_query_restarts:
                log.error("aggregator.query_failed", errors={q.name: str(q.exception()) for q in failed})
                return 1
            for query in failed:
                restarts += 1
                _restart(state, query, restarts)
        return 0
    finally:
        for query in state.queries:
            query.stop()
        health.stop()
        spark.stop()


def _restart(state: JobState, query: StreamingQuery, attempt: int) -> None:
    """Resume a failed query from its checkpoint. Its last batch is committed before Spark
    reports progress, so a failure while reporting (SPARK-55271: Kafka source metrics in
    4.1.1 throw on the first batch after a restart) or a transient Kafka error costs
    one restart, not the job."""
    log.warning("aggregator.query_restarting", name=query.name, error=str(query.exception()), attempt=attempt)
    time.sleep(min(2.0**attempt, 30.0))
    state.restart(query)


def _signal_event() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


@cli.command()
def prefetch() -> None:
    """Resolve the Kafka and Avro connectors once (Maven, into ``jars_dir``) so later starts are offline."""
    for jar in resolve_jars(load_settings(AggregatorSettings).spark.jars_dir):
        typer.echo(f"resolved {jar}")
