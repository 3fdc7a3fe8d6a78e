"""Entry point: ``fluxgate-scylla-persister`` (or ``python -m fluxgate_scylla_persister``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration (a setting,
or a KCQL statement the table cannot take), 1 when the error policy stopped the persister
or Scylla/Kafka failed it for good (Scylla never answered at start, a table missing ...).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fluxgate_core.lifecycle import run_service
from fluxgate_scylla_persister.settings import SERVICE, ScyllaSettings
from fluxgate_scylla_persister.sink import ScyllaSink
from fluxgate_sink.runner import SinkRunner

# One line per node (dis)connection, schema agreement and protocol downgrade.
QUIET_LOGGERS = ("cassandra", "cassandra.cluster", "cassandra.connection", "cassandra.pool")


def build(settings: ScyllaSettings) -> SinkRunner:
    """The runner and the sink, wired from the settings."""
    return SinkRunner(
        SERVICE,
        ScyllaSink(settings.scylla),
        kafka=settings.kafka,
        registry=settings.registry,
        settings=settings.sink,
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
        str | None, typer.Option("--group-id", help="consumer group (default fluxgate-scylla-persister)")
    ] = None,
) -> None:
    """Persist temperatures.aggregated into a Scylla/Cassandra table (configured by FLUXGATE_SCYLLA_*)."""
    code = run_service(
        SERVICE,
        ScyllaSettings,
        build,
        overrides=overrides(from_beginning, group_id),
        quiet_loggers=QUIET_LOGGERS,
    )
    raise typer.Exit(code)


def main() -> None:
    typer.run(serve)
