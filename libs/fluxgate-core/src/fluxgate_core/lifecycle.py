"""Run a service's main coroutine until SIGTERM/SIGINT, then let it drain.

The main coroutine receives a ``stop`` event; it returns once its in-flight work is
done. A second signal while draining exits at once.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable

import structlog

from fluxgate_core.errors import ConfigError

log = structlog.get_logger(__name__)
Main = Callable[[asyncio.Event], Awaitable[None]]


def run_service(main: Main) -> int:
    """Run ``main`` under asyncio with signal handling; the process exit code is returned."""
    try:
        asyncio.run(_supervise(main))
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    return 0


async def _supervise(main: Main) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _on_signal, stop, signum)
    await main(stop)


def _on_signal(stop: asyncio.Event, signum: int) -> None:
    if stop.is_set():
        log.warning("shutdown.forced", signal=signal.Signals(signum).name)
        raise SystemExit(1)
    log.info("shutdown.draining", signal=signal.Signals(signum).name)
    stop.set()
