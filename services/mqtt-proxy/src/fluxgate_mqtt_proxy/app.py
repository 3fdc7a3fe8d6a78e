"""Entry point: ``fluxgate-mqtt-proxy`` (or ``python -m fluxgate_mqtt_proxy``)."""

from __future__ import annotations

import asyncio
import logging
import sys

import structlog

from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.lifecycle import run_service
from fluxgate_core.logs import configure_logging
from fluxgate_core.settings import load_settings
from fluxgate_mqtt_proxy.service import MqttProxy
from fluxgate_mqtt_proxy.settings import SERVICE, ProxySettings

log = structlog.get_logger(__name__)


def main() -> int:
    """Exit 0 after a clean drain, 2 for bad configuration, 1 when Kafka or the registry failed us."""
    try:
        settings = load_settings(ProxySettings)
        proxy = MqttProxy(settings)
    except ConfigError as exc:
        print(f"mqtt-proxy: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(SERVICE, settings.log)
    for chatty in ("gmqtt", "httpx", "httpx2"):  # a line per packet/request would drown our own events
        logging.getLogger(chatty).setLevel(logging.WARNING)

    async def serve(stop: asyncio.Event) -> None:
        await proxy.run(stop)

    try:
        code = run_service(serve)
    except FluxgateError as exc:
        log.error("mqtt-proxy.failed", error=str(exc), error_class=type(exc).__name__)
        return 1
    if proxy.fatal is not None:
        log.error("mqtt-proxy.failed", error=str(proxy.fatal))
        return 1
    return code
