"""What one observed CoAP resource is: where it is, and what its payloads do not say themselves.

Shared by the settings (``FLUXGATE_COAP_RESOURCES``) and by the KCQL translation
(``FLUXGATE_COAP_KCQL``), which both make :class:`ResourceSettings`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from fluxgate_core.payloads import PayloadFormat
from fluxgate_core.settings import Group

SCHEMES = ("coap", "coaps", "coap+tcp")
_PATH_RULE = re.compile(r"^path:(-?\d+)$")
# What the tinydtls behind aiocoap's coaps:// (DTLSSocket 0.2.3) takes. It builds the pre-master
# secret (2 + N + 2 + N bytes, RFC 4279) in a 40-byte buffer, and holds the identity in 32: past
# either, every handshake failed with nothing but timeouts (measured against libcoap's server:
# a key of 18 bytes works, 19 does not; an identity of 32 works, 33 does not).
MAX_PSK_KEY_BYTES = 18
MAX_PSK_IDENTITY_BYTES = 32


def check_psk_sizes(identity: str | None, key: SecretStr | None) -> None:
    """Raise naming the field (a group's check across fields: its input, the key, is not shown)."""
    if identity is not None and len(identity.encode()) > MAX_PSK_IDENTITY_BYTES:
        raise ValueError(f"psk_identity: takes at most {MAX_PSK_IDENTITY_BYTES} bytes (tinydtls), this one is longer")
    if key is not None and len(key.get_secret_value().encode()) > MAX_PSK_KEY_BYTES:
        raise ValueError(f"psk_key: takes at most {MAX_PSK_KEY_BYTES} bytes (tinydtls), this one is longer")


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
        check_psk_sizes(self.psk_identity, self.psk_key)
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
