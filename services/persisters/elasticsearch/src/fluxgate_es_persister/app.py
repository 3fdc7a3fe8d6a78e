"""Entry point: ``fluxgate-es-persister`` (or ``python -m fluxgate_es_persister``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration, 1 when the
error policy stopped the persister or Elasticsearch/Kafka failed it for good.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fluxgate_core.lifecycle import run_service
from fluxgate_es_persister.mapping import IndexFamily
from fluxgate_es_persister.retention import Retention, retention_task
from fluxgate_es_persister.settings import SERVICE, ElasticsearchSettings
from fluxgate_es_persister.sink import ElasticsearchSink, families
from fluxgate_sink.kcql import parse
from fluxgate_sink.runner import SinkRunner

# Their INFO lines are one per HTTP request: a bulk every few hundred milliseconds.
QUIET_LOGGERS = ("elastic_transport.transport", "elasticsearch", "httpx")


def build(settings: ElasticsearchSettings) -> SinkRunner:
    """The runner, the sink and the retention sweep, wired from the settings."""
    sink = ElasticsearchSink(settings.elasticsearch)
    retention = None
    if settings.retention.enabled:
        targets: list[IndexFamily] = families(parse(settings.sink.kcql))
        retention = Retention(sink.client, targets, settings.retention)
    return SinkRunner(
        SERVICE,
        sink,
        kafka=settings.kafka,
        registry=settings.registry,
        settings=settings.sink,
        tasks=retention_task(retention),
    )


def overrides(from_beginning: bool, group_id: str | None) -> dict[str, Any]:
    """Command-line flags as settings overrides (they win over the environment)."""
    sink: dict[str, Any] = {}
    if from_beginning:
        sink["from_beginning"] = True
    if group_id is not None:
        sink["group_id"] = group_id
    return {"sink": sink} if sink else {}


def serve(
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="ignore committed offsets once: replay every record")
    ] = False,
    group_id: Annotated[
        str | None, typer.Option("--group-id", help="consumer group (default fluxgate-es-persister)")
    ] = None,
) -> None:
    """Persist temperatures.aggregated into daily Elasticsearch indices (configured by FLUXGATE_ES_*)."""
    code = run_service(
        SERVICE,
        ElasticsearchSettings,
        build,
        overrides=overrides(from_beginning, group_id),
        quiet_loggers=QUIET_LOGGERS,
    )
    raise typer.Exit(code)


def main() -> None:
    typer.run(serve)
