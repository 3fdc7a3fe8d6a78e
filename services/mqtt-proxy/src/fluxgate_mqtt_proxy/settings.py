"""Everything the proxy reads from its environment (prefix ``FLUXGATE_MQTT_``).

Routes are a JSON list in ``FLUXGATE_MQTT_ROUTES``, or Stream-Reactor MQTT source KCQL in
``FLUXGATE_MQTT_KCQL``, translated into the same routes when the settings load (one code path
downstream; setting both is an error naming both). They are validated when the settings load,
so a bad filter, an unknown source or a level index the filter does not have fails the deploy
with the field named instead of silently never matching.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings

from fluxgate_core.json_records import OutputSettings
from fluxgate_core.kcql import KcqlError
from fluxgate_core.limits import LimitSettings
from fluxgate_core.settings import (
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)
from fluxgate_mqtt_proxy.kcql import routes_from_kcql
from fluxgate_mqtt_proxy.route_settings import KAFKA_NAME_CHARS, STREAM_REACTOR_SEPARATOR, RouteSettings, default_routes
from fluxgate_mqtt_proxy.topics import DEFAULT_DERIVED_PATTERN, DEFAULT_MAX_DERIVED, DerivedTargets

SERVICE = "mqtt-proxy"
HEALTH_PORT = 9101


class MqttSettings(Group):
    """The broker connection: a persistent session, so what is published while we are down waits for us."""

    host: str = Field("127.0.0.1", min_length=1, description="broker host")
    port: int = Field(1883, ge=1, le=65535, description="broker port")
    protocol_version: Literal[4, 5] = Field(5, description="5 = MQTT 5, 4 = MQTT 3.1.1")
    client_id: str = Field("fluxgate-mqtt-proxy", min_length=1, description="stable id: the session is keyed by it")
    clean_start: bool = Field(False, description="true discards the broker-side session on connect")
    session_expiry_s: int = Field(86_400, ge=0, le=0xFFFFFFFF, description="how long the broker keeps our session")
    keepalive_s: int = Field(30, ge=1, le=65535, description="MQTT keep alive")
    receive_maximum: int = Field(1000, ge=1, le=65535, description="QoS 1/2 messages the broker may have unacked")
    share_group: str | None = Field(
        None, pattern=r"^[^/+#]+$", description="subscribe every route as $share/<group>/<filter>"
    )
    username: str | None = Field(None, description="broker user name")
    password: SecretStr | None = Field(None, description="broker password")
    tls: bool = Field(False, description="connect with TLS")
    ca_file: str | None = Field(None, description="CA bundle to verify the broker (default: system CAs)")
    cert_file: str | None = Field(None, description="client certificate (mutual TLS)")
    key_file: str | None = Field(None, description="client key (mutual TLS)")
    tls_insecure: bool = Field(False, description="skip verifying the broker's certificate (tests only)")
    connect_timeout_s: float = Field(10.0, gt=0, description="give up one connection attempt after this long")
    reconnect_initial_s: float = Field(0.5, gt=0, description="first reconnect delay")
    reconnect_max_s: float = Field(30.0, gt=0, description="cap of the exponential reconnect delay")

    @field_validator("protocol_version", mode="before")
    @classmethod
    def _version_from_text(cls, value: object) -> object:
        return _int_from_text(value)

    @model_validator(mode="after")
    def _key_with_cert(self) -> MqttSettings:
        if self.key_file and not self.cert_file:
            raise ValueError("key_file needs cert_file")
        given = [name for name in ("ca_file", "cert_file", "key_file", "tls_insecure") if getattr(self, name)]
        if given and not self.tls:
            # They only apply to a TLS connection: without tls it would be plain, the files unread.
            raise ValueError(f"{', '.join(given)} set but tls is false")
        return self


def _int_from_text(value: object) -> object:
    """Environment values are text, and a Literal of ints does not coerce "5"."""
    return int(value) if isinstance(value, str) and value.strip().isdigit() else value


class DerivedTopicSettings(Group):
    """What ``INSERT INTO $`` (``topic: $``) routes may write: there the device's MQTT topic names
    the Kafka topic and the registry subject, so both are held to a pattern and a count."""

    pattern: str = Field(
        DEFAULT_DERIVED_PATTERN,
        min_length=1,
        description="regular expression a derived Kafka topic must match whole; messages for any other go to the "
        "dead-letter topic (default: any name Kafka allows but Kafka's and the registry's own, _*)",
    )
    max_topics: int = Field(
        DEFAULT_MAX_DERIVED,
        ge=1,
        description="distinct derived Kafka topics (each a registry subject) one proxy writes; messages for more "
        "go to the dead-letter topic",
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        return value


class ProxySettings(BaseSettings):
    """mqtt-proxy's settings; nested groups with ``__`` (``FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS``)."""

    model_config = service_config("FLUXGATE_MQTT_")

    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    routes: list[RouteSettings] = Field(default_factory=default_routes, min_length=1, description="JSON list")
    kcql: str | None = Field(
        None,
        description="instead of routes: Stream-Reactor MQTT source KCQL, 'INSERT INTO <topic> SELECT * FROM <filter> "
        "[WITHKEY(f, ...)] [KEYDELIMITER=...] [WITHCONVERTER=...]' separated by ';' (<topic> $: from the MQTT topic)",
    )
    kcql_topic_separator: str = Field(
        STREAM_REACTOR_SEPARATOR,
        pattern=KAFKA_NAME_CHARS,
        description="KCQL INSERT INTO $: what replaces the '/' between MQTT topic levels (the first '/' is "
        "dropped, as Stream-Reactor does)",
    )
    kcql_qos: Literal[0, 1, 2] = Field(
        1,
        description="QoS of the KCQL subscriptions (Stream-Reactor's connect.mqtt.service.quality): 1 at least "
        "once, 2 no copy from the broker once the proxy has answered (PUBREC, sent once Kafka has the record), "
        "0 at most once",
    )
    derived_topics: DerivedTopicSettings = Field(default_factory=DerivedTopicSettings)
    deadletter_topic: str = Field("sensors.deadletter", min_length=1, description="where rejected payloads go")
    max_in_flight: int = Field(10_000, ge=1, description="records awaiting Kafka's ack before producing waits")
    max_pending_messages: int = Field(
        5_000, ge=1, description="MQTT messages being handled before the proxy stops reading the socket"
    )
    drain_timeout_s: float = Field(30.0, gt=0, description="on SIGTERM, wait this long for in-flight messages")
    limits: LimitSettings = Field(default_factory=LimitSettings)
    output: OutputSettings = group(OutputSettings)
    kafka: KafkaSettings = group(KafkaSettings)
    registry: RegistrySettings = group(RegistrySettings)
    http: HttpSettings = group(HttpSettings, port=HEALTH_PORT)
    log: LogSettings = group(LogSettings)

    def derived_targets(self) -> DerivedTargets:
        """What ``$`` routes may derive: :attr:`derived_topics`, never the dead-letter topic."""
        derived = self.derived_topics
        return DerivedTargets(re.compile(derived.pattern), derived.max_topics, frozenset({self.deadletter_topic}))

    @field_validator("kcql_qos", mode="before")
    @classmethod
    def _qos_from_text(cls, value: object) -> object:
        return _int_from_text(value)

    @field_validator("kcql")
    @classmethod
    def _kcql_parses(cls, text: str | None) -> str | None:
        if text is not None:
            try:
                routes_from_kcql(text)
            except KcqlError as exc:  # pydantic names the field (FLUXGATE_MQTT_KCQL) around this message
                raise ValueError(str(exc)) from exc
        return text

    @model_validator(mode="after")
    def _routes_from_kcql(self) -> ProxySettings:
        if self.kcql is None:
            return self
        if "routes" in self.model_fields_set:
            raise ValueError(
                "FLUXGATE_MQTT_ROUTES and FLUXGATE_MQTT_KCQL are both set: they say the same thing two ways, so "
                "keep one (routes as JSON, or Stream-Reactor's KCQL)"
            )
        # The settings are frozen; this is their construction, so the routes are set once, here.
        object.__setattr__(self, "routes", routes_from_kcql(self.kcql, self.kcql_topic_separator, self.kcql_qos))
        return self
