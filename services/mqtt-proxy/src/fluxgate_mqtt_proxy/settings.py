"""Everything the proxy reads from its environment (prefix ``FLUXGATE_MQTT_``).

Routes are a JSON list in ``FLUXGATE_MQTT_ROUTES``; they are compiled at start, so a
bad filter or a level index the filter does not have fails the deploy with the field
named instead of silently never matching.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from fluxgate_core.payloads import PayloadFormat
from fluxgate_core.settings import (
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    service_config,
)

SERVICE = "mqtt-proxy"


class FieldNames(Group):
    """Which keys of a JSON payload mean what (every other numeric key is a metric)."""

    device: str = "sensorId"
    time: str = "timestamp"
    sequence: str = "seq"
    unit: str = "unit"
    metric: str = "metric"
    value: str = "value"


class RouteSettings(Group):
    """One MQTT topic filter and how its messages become readings."""

    filter: str = Field(min_length=1, description="MQTT topic filter (+ and #), optionally $share/<group>/...")
    topic: str = Field("sensors.readings", min_length=1, description="Kafka topic of the readings")
    device_from: str = Field(
        "payload", description="topic:N (topic level, 0-based), payload (its device field) or payload:<field>"
    )
    metric_from: str = Field("payload", description="topic:N, payload (object keys / SenML names) or const:<name>")
    format: PayloadFormat = Field("auto", description="auto | json | number | senml | cbor | senml-cbor")
    fields: FieldNames = Field(default_factory=FieldNames, description="JSON field names")
    qos: Literal[0, 1, 2] = Field(1, description="QoS of the subscription")

    @field_validator("device_from")
    @classmethod
    def _device_source(cls, value: str) -> str:
        if value == "payload" or value.startswith(("topic:", "payload:")):
            return value
        raise ValueError(f"expected topic:N, payload or payload:<field>, got {value!r}")

    @field_validator("metric_from")
    @classmethod
    def _metric_source(cls, value: str) -> str:
        if value == "payload" or value.startswith(("topic:", "const:")):
            return value
        raise ValueError(f"expected topic:N, payload or const:<name>, got {value!r}")


DEFAULT_ROUTES = [
    RouteSettings(filter="sensors/+/+", device_from="topic:1", metric_from="topic:2"),
    RouteSettings(filter="devices/+/senml", device_from="topic:1", metric_from="payload", format="senml"),
]


class MqttSettings(Group):
    """The broker connection: a persistent session so nothing published while we are down is lost."""

    host: str = "127.0.0.1"
    port: int = Field(1883, ge=1, le=65535)
    protocol_version: Literal[4, 5] = Field(5, description="5 = MQTT 5, 4 = MQTT 3.1.1")
    client_id: str = Field("fluxgate-mqtt-proxy", min_length=1, description="stable id: the session is keyed by it")
    clean_start: bool = Field(False, description="true discards the broker-side session on connect")
    session_expiry_s: int = Field(86_400, ge=0, le=0xFFFFFFFF, description="how long the broker keeps our session")
    keepalive_s: int = Field(30, ge=1, le=65535)
    receive_maximum: int = Field(1000, ge=1, le=65535, description="QoS 1/2 messages in flight from the broker")
    share_group: str | None = Field(None, description="subscribe as $share/<group>/<filter> to split load")
    username: str | None = None
    password: SecretStr | None = None
    tls: bool = Field(False, description="connect with TLS")
    ca_file: str | None = Field(None, description="CA bundle to verify the broker")
    cert_file: str | None = Field(None, description="client certificate (mutual TLS)")
    key_file: str | None = Field(None, description="client key (mutual TLS)")
    tls_insecure: bool = Field(False, description="skip broker certificate verification (tests only)")
    reconnect_initial_s: float = Field(0.5, gt=0, description="first reconnect delay")
    reconnect_max_s: float = Field(30.0, gt=0, description="cap of the exponential reconnect delay")


class ProxySettings(BaseSettings):
    """mqtt-proxy's settings; nested groups with ``__`` (``FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS``)."""

    model_config = service_config("FLUXGATE_MQTT_")

    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    routes: list[RouteSettings] = Field(default_factory=lambda: list(DEFAULT_ROUTES), min_length=1)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    registry: RegistrySettings = Field(default_factory=RegistrySettings)
    http: HttpSettings = Field(default_factory=lambda: HttpSettings(port=9101))
    log: LogSettings = Field(default_factory=LogSettings)
    deadletter_topic: str = Field("sensors.deadletter", min_length=1, description="where rejected payloads go")
    max_in_flight: int = Field(10_000, ge=1, description="records awaiting Kafka's ack before producing waits")
    max_pending_messages: int = Field(
        5_000, ge=1, description="MQTT messages being handled before the proxy stops reading the socket"
    )
