"""Everything coap-ingest reads from its environment (prefix ``FLUXGATE_COAP_``).

Resources are a JSON list in ``FLUXGATE_COAP_RESOURCES``; each names one observable
CoAP resource and how its notifications become ``SensorReading`` records. They are
validated at start so a typo fails the deploy with the field named, not a silent
observation that never produces anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings

from fluxgate_coap_ingest.kcql import resources_from_kcql
from fluxgate_coap_ingest.resource_settings import SCHEMES, ResourceSettings, check_psk_sizes
from fluxgate_core.json_records import OutputSettings
from fluxgate_core.kcql import COAP_SOURCE, KcqlError, parse_sources
from fluxgate_core.limits import LimitSettings
from fluxgate_core.settings import (
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    read_secret_file,
    service_config,
)

SERVICE = "coap-ingest"


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
    psk_key: SecretStr | None = Field(default=None, description="pre-shared key; excludes psk_key_file")
    psk_key_file: Path | None = Field(
        default=None, description="file holding the pre-shared key (a mounted Secret), read at start; excludes psk_key"
    )

    @model_validator(mode="after")
    def _identity_with_key(self) -> DtlsSettings:
        if self.psk_key is not None and self.psk_key_file is not None:
            raise ValueError("psk_key_file: set either it or psk_key, not both")
        key = self.key()
        if key is not None and not self.psk_identity:
            raise ValueError("psk_identity is required with psk_key")
        check_psk_sizes(self.psk_identity, key)
        return self

    def key(self) -> SecretStr | None:
        """The pre-shared key, from ``psk_key`` or the file ``psk_key_file`` names."""
        if self.psk_key_file is None:
            return self.psk_key
        return SecretStr(read_secret_file(self.psk_key_file, "psk_key_file"))


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
    output_format: Literal["reading", "coap-message"] = Field(
        default="reading",
        description=(
            "reading: SensorReading records parsed from the payloads; coap-message: every CoAP response whole "
            "(Stream-Reactor's CoAP source record, schemas/coap_message.avsc), whatever its payload"
        ),
    )
    observe: ObserveSettings = Field(default_factory=ObserveSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    output: OutputSettings = group(OutputSettings)
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
        default_key = dtls.key() if isinstance(dtls, DtlsSettings) else None
        for index, resource in enumerate(resources):
            if resource.secure and resource.psk_key is None and default_key is None:
                raise ValueError(f"resource {index} ({resource.uri}) is coaps:// but no PSK is set (dtls__psk_key)")
        return resources

    @field_validator("kcql")
    @classmethod
    def _kcql_parses(cls, text: str | None) -> str | None:
        if text is not None:
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
        resources = resources_from_kcql(self.kcql, self.source_uri)
        if resources[0].secure and self.dtls.key() is None:
            raise ValueError("FLUXGATE_COAP_SOURCE_URI is coaps:// but no PSK is set (FLUXGATE_COAP_DTLS__PSK_KEY)")
        # The settings are frozen; this is their construction, so the resources are set once, here.
        object.__setattr__(self, "resources", resources)
        return self
