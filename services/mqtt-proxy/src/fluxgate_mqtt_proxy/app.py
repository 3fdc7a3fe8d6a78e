"""Entry point: ``fluxgate-mqtt-proxy`` (or ``python -m fluxgate_mqtt_proxy``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration, 1 when
the registry, Kafka or the broker failed us; an orchestrator restarts it, and the
persistent MQTT session keeps what arrives meanwhile.
"""

from __future__ import annotations

import asyncio
import logging

import structlog

from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.lifecycle import run_service
from fluxgate_core.logs import configure_logging
from fluxgate_core.settings import LogSettings, load_settings
from fluxgate_mqtt_proxy.service import MqttProxy
from fluxgate_mqtt_proxy.settings import SERVICE, ProxySettings

log = structlog.get_logger(__name__)


def main() -> int:
    try:
        settings = load_settings(ProxySettings)
    except ConfigError as exc:
        configure_logging(SERVICE, LogSettings())  # type: ignore[call-arg]
        log.error("config.invalid", error=str(exc))
        return 2
    configure_logging(SERVICE, settings.log)
    # gmqtt and the registry's HTTP client log every SUBSCRIBE / request at INFO.
    for chatty in ("gmqtt", "httpx", "httpx2"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLevelName(settings.log.level)))
    proxy = MqttProxy(settings)

    async def serve(stop: asyncio.Event) -> None:
        await proxy.run(stop)

    log.info("mqtt-proxy.starting", broker=f"{settings.mqtt.host}:{settings.mqtt.port}", routes=len(proxy.routes))
    try:
        code = run_service(serve)
    except FluxgateError as exc:
        log.error("mqtt-proxy.failed", error=str(exc), error_class=type(exc).__name__)
        return 1
    if proxy.fatal is not None:
        log.error("mqtt-proxy.stopped", error=str(proxy.fatal), error_class=type(proxy.fatal).__name__)
        return 1
    log.info("mqtt-proxy.stopped")
    return code
