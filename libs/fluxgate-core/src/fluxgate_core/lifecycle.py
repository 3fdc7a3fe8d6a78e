"""One way to start every service: settings, logs, health, signals, exit code.

:func:`run_service` loads the service's settings, configures logging, serves
``/healthz``, ``/readyz`` and ``/metrics``, and runs the service until SIGTERM/SIGINT
sets ``stop``; the service then drains and returns. A second signal while draining
exits at once (1).

Exit codes: 0 after a clean drain, 2 for bad configuration (one line naming the
field), 1 when the service failed (a :class:`FluxgateError` raised from ``run``, or one
it recorded in ``fatal`` before asking to stop).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import structlog
from pydantic_settings import BaseSettings

from fluxgate_core.collector import tune_collector
from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.health import HealthServer
from fluxgate_core.logs import configure_logging
from fluxgate_core.settings import HttpSettings, LogSettings, load_settings

log = structlog.get_logger(__name__)
S = TypeVar("S", bound=BaseSettings)
EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


class Service(Protocol):
    """What :func:`run_service` runs. It may also have a ``fatal`` attribute: an error that
    made it set ``stop`` itself, which turns a clean return into exit 1."""

    def ready(self) -> bool:
        """Readiness for ``/readyz`` (called from the health server's thread)."""
        ...

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then drain and return; raise FluxgateError on failure."""
        ...


def run_service(
    name: str,
    settings_cls: type[S],
    build: Callable[[S], Service],
    *,
    overrides: Mapping[str, Any] | None = None,
    quiet_loggers: Sequence[str] = (),
) -> int:
    """Run the service ``build`` makes from ``settings_cls`` (which has ``log`` and ``http``
    groups); return the process exit code."""
    try:
        settings = load_settings(settings_cls, **(overrides or {}))
    except ConfigError as exc:
        return config_failed(name, exc)
    configure_logging(name, _group(settings, "log", LogSettings))
    quiet(quiet_loggers)
    try:
        service = build(settings)
        tune_collector()
        asyncio.run(_serve(service, _group(settings, "http", HttpSettings)))
    except ConfigError as exc:  # found only once running (a transport that is not installed...)
        return config_failed(name, exc)
    except FluxgateError as exc:
        log.error("service.failed", error=str(exc), error_class=type(exc).__name__)
        return EXIT_FAILED
    return _stopped(service)


async def _serve(service: Service, http: HttpSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _on_signal, stop, signum)
    health = _health(service, http)
    try:
        await service.run(stop)
    finally:
        health.stop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def _health(service: Service, http: HttpSettings) -> HealthServer:
    try:
        return HealthServer(http, {"ready": service.ready}, attention=getattr(service, "attention", None)).start()
    except OSError as exc:  # the port is taken: say which, exit 1
        raise FluxgateError(f"cannot serve health on {http.host}:{http.port}: {exc}") from exc


def _on_signal(stop: asyncio.Event, signum: int) -> None:
    if stop.is_set():
        log.warning("shutdown.forced", signal=signal.Signals(signum).name)
        sys.stderr.flush()
        # Not SystemExit: asyncio.run would then wait for the very tasks and threads
        # (a blocking driver loop) that are not finishing, which is why a second signal came.
        os._exit(EXIT_FAILED)
    log.info("shutdown.draining", signal=signal.Signals(signum).name)
    stop.set()


def _stopped(service: Service) -> int:
    fatal = getattr(service, "fatal", None)
    if isinstance(fatal, BaseException):
        log.error("service.stopped", error=str(fatal), error_class=type(fatal).__name__)
        return EXIT_FAILED
    log.info("service.stopped")
    return EXIT_OK


def quiet(loggers: Sequence[str]) -> None:
    """Libraries that log a line per request: never below WARNING, never chattier than the service."""
    for chatty in loggers:
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLogger().level))


def config_failed(name: str, exc: ConfigError) -> int:
    """Say what is wrong with the configuration, one line naming every field; the exit code."""
    # Logging may not be configured yet: one plain line on stderr, every field on it.
    head, *fields = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    print(f"{name}: {head} {'; '.join(fields)}".rstrip(), file=sys.stderr, flush=True)
    return EXIT_CONFIG


G = TypeVar("G")


def _group(settings: BaseSettings, name: str, kind: type[G]) -> G:
    group = getattr(settings, name, None)
    if not isinstance(group, kind):
        raise TypeError(f"{type(settings).__name__} needs a {name!r} field of type {kind.__name__}")
    return group
