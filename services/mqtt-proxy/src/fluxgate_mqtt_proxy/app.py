"""Entry point: ``fluxgate-mqtt-proxy`` (or ``python -m fluxgate_mqtt_proxy``).

Exit codes: 0 after a clean drain (SIGTERM/SIGINT), 2 for bad configuration, 1 when
the registry, Kafka or the broker failed us; an orchestrator restarts it, and the
persistent MQTT session keeps what arrives meanwhile.
"""

from __future__ import annotations

from fluxgate_core.lifecycle import run_service
from fluxgate_mqtt_proxy.service import MqttProxy
from fluxgate_mqtt_proxy.settings import SERVICE, ProxySettings

# gmqtt and the registry's HTTP client log every SUBSCRIBE / request at INFO.
CHATTY_LOGGERS = ("gmqtt", "httpx", "httpx2")


def main() -> int:
    return run_service(SERVICE, ProxySettings, MqttProxy, quiet_loggers=CHATTY_LOGGERS)
