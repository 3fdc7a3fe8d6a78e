"""Every persister's command line: ``fluxgate-<store>-persister [--from-beginning] [--group-id G]``.

A persister names its settings class and how to build its sink; the runner, the flags, the
start-up (:func:`fluxgate_core.lifecycle.run_service`) and the exit codes are the same for
all: 0 after a clean drain, 2 for bad configuration, 1 when the error policy or the store
stopped it.
"""

# No `from __future__ import annotations`: typer reads the flags' annotations at run time,
# and their help names the service from the enclosing function.
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Protocol, TypeVar, cast

import typer
from pydantic_settings import BaseSettings

from fluxgate_core.lifecycle import run_service
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_sink.runner import SinkRunner, Task
from fluxgate_sink.settings import SinkSettings
from fluxgate_sink.sink import Sink

S = TypeVar("S", bound=BaseSettings)


class PersisterSettings(Protocol):
    """The groups every persister's settings have (besides ``http``, ``log`` and its store's)."""

    @property
    def kafka(self) -> KafkaSettings: ...
    @property
    def registry(self) -> RegistrySettings: ...
    @property
    def sink(self) -> SinkSettings: ...


def persister_main(
    service: str,
    settings_cls: type[S],
    make_sink: Callable[[S], Sink],
    *,
    description: str,
    make_tasks: Callable[[S, Sink], Sequence[Task]] | None = None,
    quiet_loggers: Sequence[str] = (),
) -> Callable[[], None]:
    """The console-script ``main`` of a persister whose sink ``make_sink`` builds from its settings."""

    def build(settings: S) -> SinkRunner:
        sink = make_sink(settings)
        common = cast(PersisterSettings, settings)
        return SinkRunner(
            service,
            sink,
            kafka=common.kafka,
            registry=common.registry,
            settings=common.sink,
            tasks=make_tasks(settings, sink) if make_tasks else (),
            env_prefix=str(settings_cls.model_config.get("env_prefix", "")),
        )

    def serve(
        from_beginning: Annotated[
            bool, typer.Option("--from-beginning", help="ignore committed offsets once: replay every record")
        ] = False,
        group_id: Annotated[
            str | None, typer.Option("--group-id", help=f"consumer group (default fluxgate-{service})")
        ] = None,
    ) -> None:
        code = run_service(
            service, settings_cls, build, overrides=overrides(from_beginning, group_id), quiet_loggers=quiet_loggers
        )
        raise typer.Exit(code)

    serve.__doc__ = description
    return lambda: typer.run(serve)


def overrides(from_beginning: bool, group_id: str | None) -> dict[str, Any]:
    """Command-line flags as settings overrides (they win over the environment)."""
    sink: dict[str, Any] = {}
    if from_beginning:
        sink["from_beginning"] = True
    if group_id is not None:
        sink["group_id"] = group_id
    return {"sink": sink} if sink else {}
