"""Everything coap-ingest reads from its environment (prefix ``FLUXGATE_COAP_``).

Resources are a JSON list in ``FLUXGATE_COAP_RESOURCES``; each names one observable
CoAP resource and how its notifications become ``SensorReading`` records. They are
validated at start so a typo fails the deploy with the field named, not a silent
observation that never produces anything.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings

from fluxgate_core.limits import LimitSettings
from fluxgate_core.payloads import PayloadFormat
from fluxgate_core.settings import (
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)

SERVICE = "coap-ingest"
SCHEMES = ("coap", "coaps", "coap+tcp")
_PATH_RULE = re.compile(r"^path:(-?\d+)$")


class ResourceSettings(Group):
    """One observed resource: where it is, and what its payloads do not say themselves."""

    uri: str = Field(description="coap://, coaps:// or coap+tcp:// URI of an observable resource")
    device_id: str | None = Field(default=None, min_length=1, description="device id when the payload has none")
    metric: str | None = Field(default=None, min_length=1, description="metric name when the payload has none")
    device_from: str | None = Field(default=None, description="take the device id from a URI path level: path:N")
    metric_from: str | None = Field(default=None, description="take the metric from a URI path level: path:N")
    topic: str = Field(default="sensors.readings", min_length=1, description="Kafka topic of the readings")
    payload_format: PayloadFormat = Field(
        default="auto", description="parser override; auto follows the Content-Format"
    )
    psk_identity: str | None = Field(default=None, description="DTLS PSK identity for this resource (coaps only)")
    psk_key: SecretStr | None = Field(default=None, description="DTLS pre-shared key for this resource (coaps only)")

    @field_validator("uri")
    @classmethod
    def _valid_uri(cls, uri: str) -> str:
        parts = urlsplit(uri)
        if parts.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {parts.scheme or 'none'!r}")
        if not parts.hostname:
            raise ValueError("URI has no host")
        if parts.path in ("", "/"):
            raise ValueError("URI has no resource path")
        _ = parts.port  # raises ValueError on a non-numeric or out-of-range port
        return uri

    @field_validator("device_from", "metric_from")
    @classmethod
    def _valid_rule(cls, rule: str | None) -> str | None:
        if rule is not None and not _PATH_RULE.match(rule):
            raise ValueError(f"expected path:N (a URI path level, 0-based, negative from the end), got {rule!r}")
        return rule

    @model_validator(mode="after")
    def _rules_fit_uri(self) -> ResourceSettings:
        for rule in (self.device_from, self.metric_from):
            if rule is not None and path_level(self.uri, rule) is None:
                raise ValueError(f"{rule} is beyond the path levels of {self.uri}")
        if (self.psk_identity is None) != (self.psk_key is None):
            raise ValueError("psk_identity and psk_key go together")
        if self.psk_key is not None and not self.secure:
            raise ValueError("psk_identity/psk_key need a coaps:// URI")
        return self

    @property
    def secure(self) -> bool:
        return urlsplit(self.uri).scheme == "coaps"

    @property
    def host(self) -> str:
        """The server's host, a low-cardinality metrics label (never the device)."""
        return urlsplit(self.uri).hostname or ""

    def routed_device(self) -> str | None:
        """The device id from configuration: explicit, else from the URI path."""
        if self.device_id:
            return self.device_id
        return path_level(self.uri, self.device_from) if self.device_from else None

    def routed_metric(self) -> str | None:
        if self.metric:
            return self.metric
        return path_level(self.uri, self.metric_from) if self.metric_from else None


def path_level(uri: str, rule: str) -> str | None:
    """Level N of the URI path (``path:1`` of ``/sensors/dev-1/temperature`` is ``dev-1``)."""
    match = _PATH_RULE.match(rule)
    if match is None:
        return None
    levels = [level for level in urlsplit(uri).path.split("/") if level]
    index = int(match.group(1))
    return levels[index] if -len(levels) <= index < len(levels) else None


class ObserveSettings(Group):
    """How observations are kept alive."""

    request_timeout_s: float = Field(default=10.0, gt=0, description="wait this long for the registration response")
    max_age_s: float = Field(
        default=90.0, gt=0, description="re-register when no notification arrived for this long (server restarted?)"
    )
    backoff_initial_s: float = Field(default=0.5, gt=0, description="first delay before re-registering")
    backoff_max_s: float = Field(default=30.0, gt=0, description="cap of the re-registration delay")
    backoff_multiplier: float = Field(default=2.0, ge=1.0, description="growth of the delay per failed attempt")
    backoff_jitter: float = Field(default=0.2, ge=0, le=1, description="fraction of the delay randomised away")
    dedupe_window: int = Field(
        default=256, ge=1, le=100_000, description="recent notifications remembered per resource"
    )
    queue_size: int = Field(default=1000, ge=1, description="notifications per resource received, not yet done")


class DtlsSettings(Group):
    """Default DTLS pre-shared key for coaps:// resources without their own."""

    psk_identity: str | None = Field(default=None, description="PSK identity")
    psk_key: SecretStr | None = Field(default=None, description="pre-shared key")

    @model_validator(mode="after")
    def _identity_with_key(self) -> DtlsSettings:
        if self.psk_key is not None and not self.psk_identity:
            raise ValueError("psk_identity is required with psk_key")
        return self


# Records linger 25 ms, not 5. Notifications arrive a few per event-loop turn, so at 5 ms a
# produce request carried a handful of records and the broker spent 30 to 66 µs of CPU per
# record; at 25 ms, 10 to 16. On a 2-core box that CPU is the pipeline's: coap-ingest went
# from 4,800 to 5,441 notifications/s (0.79 to 0.88 of a plain aiocoap observer) to 5,652 to
# 5,986 (0.92 to 0.96; ``bench/README.md``). Devices do not wait on it: the CoAP ACK goes at once.
KAFKA_LINGER_MS = 25


class CoapIngestSettings(BaseSettings):
    """coap-ingest's settings; nested groups with ``__`` (``FLUXGATE_COAP_KAFKA__BOOTSTRAP_SERVERS``)."""

    model_config = service_config("FLUXGATE_COAP_")

    # Before ``resources``: validating a coaps:// resource looks at the default key.
    dtls: DtlsSettings = Field(default_factory=DtlsSettings)
    resources: list[ResourceSettings] = Field(default_factory=list, description="the resources to observe (JSON)")
    deadletter_topic: str = Field(default="sensors.deadletter", min_length=1, description="where rejected payloads go")
    max_in_flight: int = Field(default=10_000, ge=1, description="records awaiting Kafka's ack before sending waits")
    readiness: Literal["any", "all"] = Field(default="any", description="ready when any / all observations are active")
    # Before ``member``: its check needs this.
    members: int = Field(
        default=1, ge=1, description="instances sharing `resources`: each observes every members-th one, from `member`"
    )
    member: int = Field(
        default=0, ge=0, description="this instance's place among `members`, from 0 (a StatefulSet's pod index)"
    )
    observe: ObserveSettings = Field(default_factory=ObserveSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    kafka: KafkaSettings = group(KafkaSettings, linger_ms=KAFKA_LINGER_MS)
    registry: RegistrySettings = group(RegistrySettings)
    http: HttpSettings = group(HttpSettings, port=9102)
    log: LogSettings = group(LogSettings)
    kcql: str | None = Field(
        default=None,
        description="instead of resources: Stream-Reactor CoAP source KCQL, 'INSERT INTO <topic> SELECT * FROM "
        "<resource>[, <resource>...]' separated by ';', the resources on the server at source_uri",
    )
    source_uri: str | None = Field(
        default=None, description="with kcql: the CoAP server its resources are on (coap://localhost:5633)"
    )

    @field_validator("member")
    @classmethod
    def _member_of_members(cls, member: int, info: ValidationInfo) -> int:
        members = info.data.get("members")
        if isinstance(members, int) and member >= members:
            raise ValueError(f"must be below members ({members}): members count from 0")
        return member

    @property
    def observed(self) -> list[ResourceSettings]:
        """The resources this member observes: every ``members``-th of ``resources``, from
        ``member``. Members of one configuration together observe each resource exactly once."""
        return self.resources[self.member :: self.members]

    @field_validator("resources")
    @classmethod
    def _secure_resources_have_keys(
        cls, resources: list[ResourceSettings], info: ValidationInfo
    ) -> list[ResourceSettings]:
        dtls = info.data.get("dtls")
        default_key = dtls.psk_key if isinstance(dtls, DtlsSettings) else None
        for index, resource in enumerate(resources):
            if resource.secure and resource.psk_key is None and default_key is None:
                raise ValueError(f"resource {index} ({resource.uri}) is coaps:// but no PSK is set (dtls__psk_key)")
        return resources

    @field_validator("kcql")
    @classmethod
    def _kcql_parses(cls, text: str | None) -> str | None:
        if text is not None:
            from fluxgate_core.kcql import COAP_SOURCE, KcqlError, parse_sources

            try:
                parse_sources(text, COAP_SOURCE)
            except KcqlError as exc:  # pydantic names the field (FLUXGATE_COAP_KCQL) around this message
                raise ValueError(str(exc)) from exc
        return text

    @field_validator("source_uri")
    @classmethod
    def _server_uri(cls, uri: str | None) -> str | None:
        parts = urlsplit(uri or "coap://host")
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ValueError(f"expected {', '.join(f'{scheme}://<host>[:port]' for scheme in SCHEMES)}")
        return uri

    @model_validator(mode="after")
    def _resources_from_kcql(self) -> CoapIngestSettings:
        if self.kcql is None:
            if self.source_uri is not None:
                raise ValueError(
                    "FLUXGATE_COAP_SOURCE_URI is set without FLUXGATE_COAP_KCQL, which names its resources"
                )
            return self
        if "resources" in self.model_fields_set:
            raise ValueError(
                "FLUXGATE_COAP_RESOURCES and FLUXGATE_COAP_KCQL are both set: they say the same thing two ways, so "
                "keep one (resources as JSON, or Stream-Reactor's KCQL with FLUXGATE_COAP_SOURCE_URI)"
            )
        if self.source_uri is None:
            raise ValueError("FLUXGATE_COAP_KCQL needs FLUXGATE_COAP_SOURCE_URI: the server its resources are on")
        from fluxgate_coap_ingest.kcql import resources_from_kcql

        resources = resources_from_kcql(self.kcql, self.source_uri)
        if resources[0].secure and self.dtls.psk_key is None:
            raise ValueError("FLUXGATE_COAP_SOURCE_URI is coaps:// but no PSK is set (FLUXGATE_COAP_DTLS__PSK_KEY)")
        # The settings are frozen; this is their construction, so the resources are set once, here.
        object.__setattr__(self, "resources", resources)
        return self
