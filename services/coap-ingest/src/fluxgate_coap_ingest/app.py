"""``fluxgate-coap-ingest``: configure from the environment, serve health, observe until SIGTERM."""

from __future__ import annotations

import asyncio
import sys

import structlog

from fluxgate_coap_ingest.service import CoapIngestService
from fluxgate_coap_ingest.settings import SERVICE, CoapIngestSettings
from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.health import HealthServer
from fluxgate_core.lifecycle import run_service
from fluxgate_core.logs import configure_logging
from fluxgate_core.settings import load_settings

log = structlog.get_logger(__name__)


async def run(stop: asyncio.Event) -> None:
    """Run the service until ``stop`` is set, then drain."""
    settings = load_settings(CoapIngestSettings)
    configure_logging(SERVICE, settings.log)
    service = CoapIngestService(settings, stop)
    health = HealthServer(settings.http, checks={"ready": service.ready}).start()
    try:
        async with service:
            await stop.wait()
    except ConfigError:
        raise
    except FluxgateError as exc:
        # Registry down, Kafka refused ...: one log line and a non-zero exit, no traceback.
        log.error("service.failed", error=str(exc), error_class=type(exc).__name__)
        raise SystemExit(1) from exc
    finally:
        health.stop()
    if service.fatal is not None:
        log.error("service.stopped", error=str(service.fatal), error_class=type(service.fatal).__name__)
        raise SystemExit(1)


def main() -> None:
    """Console-script entry point."""
    sys.exit(run_service(run))


if __name__ == "__main__":
    main()
