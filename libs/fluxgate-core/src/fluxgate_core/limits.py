"""What one input may cost, so that no single message can stop a gateway.

A payload over ``max_payload_bytes`` is refused before it is parsed, and one that
expands into more than ``max_readings`` readings is refused too; both go to the
dead-letter topic (a payload too large to go whole goes bounded: see
:mod:`fluxgate_core.deadletter`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from fluxgate_core.errors import PayloadError
from fluxgate_core.settings import Group

KAFKA_DEFAULT_MAX_BYTES = 1_000_000  # librdkafka's message.max.bytes: nothing larger is ever sent
DEFAULT_HEAD_BYTES = 4096
# Well under Kafka's 1 MB default, so a whole dead letter (payload + headers) still fits.
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
DEFAULT_MAX_READINGS = 1000


class PayloadTooLarge(PayloadError):
    """The payload is over the configured size; it was not parsed."""


class TooManyReadings(PayloadError):
    """The payload expands into more readings than one message may."""


@dataclass(frozen=True, slots=True)
class PayloadLimits:
    """What one message may cost: bytes before parsing, readings after."""

    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_readings: int = DEFAULT_MAX_READINGS

    def check_size(self, payload: bytes) -> None:
        """Raise :class:`PayloadTooLarge` before anything reads a payload over ``max_bytes``."""
        if len(payload) > self.max_bytes:
            raise PayloadTooLarge(f"payload is {len(payload)} bytes, over the limit of {self.max_bytes} bytes")

    def check_count(self, count: int) -> None:
        if count > self.max_readings:
            raise TooManyReadings(f"payload holds more than {self.max_readings} readings (the limit per message)")


DEFAULT_LIMITS = PayloadLimits()


class LimitSettings(Group):
    """What one input may cost; the same group in every gateway (``*_LIMITS__*``)."""

    max_payload_bytes: int = Field(
        DEFAULT_MAX_PAYLOAD_BYTES, ge=1, le=KAFKA_DEFAULT_MAX_BYTES, description="larger payloads are not parsed"
    )
    max_readings: int = Field(DEFAULT_MAX_READINGS, ge=1, description="readings one message may expand into")
    deadletter_head_bytes: int = Field(
        DEFAULT_HEAD_BYTES, ge=0, le=64 * 1024, description="payload bytes a bounded dead letter keeps"
    )

    def payload_limits(self) -> PayloadLimits:
        return PayloadLimits(self.max_payload_bytes, self.max_readings)
