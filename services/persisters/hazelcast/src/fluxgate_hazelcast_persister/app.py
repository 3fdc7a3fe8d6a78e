"""Entry point: ``fluxgate-hazelcast-persister`` (or ``python -m fluxgate_hazelcast_persister``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration, 1 when the
error policy stopped the persister or Hazelcast/Kafka failed it for good.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fluxgate_core.lifecycle import run_service
from fluxgate_hazelcast_persister.settings import SERVICE, HazelcastSettings
from fluxgate_hazelcast_persister.sink import HazelcastSink
from fluxgate_sink.runner import SinkRunner

# The client logs every connection attempt and member-list change at INFO.
QUIET_LOGGERS = ("hazelcast",)


def build(settings: HazelcastSettings) -> SinkRunner:
    """The runner and the sink, wired from the settings."""
    sink = HazelcastSink(settings.hazelcast, settings.group_id())
    return SinkRunner(SERVICE, sink, kafka=settings.kafka, registry=settings.registry, settings=settings.sink)


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
        str | None, typer.Option("--group-id", help="consumer group (default fluxgate-hazelcast-persister)")
    ] = None,
) -> None:
    """Persist temperatures.aggregated into Hazelcast structures (configured by FLUXGATE_HZ_*)."""
    code = run_service(
        SERVICE,
        HazelcastSettings,
        build,
        overrides=overrides(from_beginning, group_id),
        quiet_loggers=QUIET_LOGGERS,
    )
    raise typer.Exit(code)


def main() -> None:
    typer.run(serve)
