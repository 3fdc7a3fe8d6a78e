"""``fluxgate-aggregator run`` (the job) and ``fluxgate-aggregator prefetch`` (warm the jar cache)."""

from __future__ import annotations

import logging
import signal
import sys
import threading

import structlog
import typer

from fluxgate_aggregator.connectors import resolve_jars
from fluxgate_aggregator.contracts import load_contracts
from fluxgate_aggregator.job import JobState, start
from fluxgate_aggregator.progress import ProgressListener
from fluxgate_aggregator.settings import SERVICE, AggregatorSettings
from fluxgate_aggregator.spark import build_session
from fluxgate_aggregator.supervise import Supervisor
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
    client = registry_client(settings.registry)
    contracts = load_contracts(client, settings.input_topic, settings.output_topic, settings.registry.compatibility)
    spark = build_session(settings.spark)
    state = JobState()
    spark.streams.addListener(ProgressListener(state))
    start(spark, settings, contracts, state)
    supervisor = Supervisor(spark, settings, client, contracts, state)
    health = HealthServer(settings.http, {"queries": lambda: all(q.isActive for q in state.queries)}).start()
    log.info(
        "aggregator.started", input=settings.input_topic, output=settings.output_topic, window=settings.window.size
    )
    try:
        return 0 if supervisor.run(stop) else 1
    finally:
        for query in state.queries:
            query.stop()
        health.stop()
        spark.stop()


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
