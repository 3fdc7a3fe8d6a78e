"""What one input may cost, so that no single message can stop a gateway.

A payload over ``max_payload_bytes`` is refused before it is parsed, and one that
expands into more than ``max_readings`` readings is refused too; both go to the
dead-letter topic (a payload too large to go whole goes bounded: see
:mod:`fluxgate_core.deadletter`).

Neither bounds what a message *produces*: a payload's string fields (and MQTT 5 user
properties, which are not payload at all) are copied into every reading it holds, so one
256 KiB message within both limits could become 1,000 records of 256 KiB each. So the
records of one message together (values, keys, headers) may take ``max_output_bytes``;
past it the message is refused, before anything of it reaches Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import Field

from fluxgate_core.errors import PayloadError
from fluxgate_core.settings import Group

KAFKA_DEFAULT_MAX_BYTES = 1_000_000  # librdkafka's message.max.bytes: nothing larger is ever sent
DEFAULT_HEAD_BYTES = 4096
# Well under Kafka's 1 MB default, so a whole dead letter (payload + headers) still fits.
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
DEFAULT_MAX_READINGS = 1000
# Four times the payload limit: a full pack of 1,000 small readings takes about a fifth of it.
DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024


class PayloadTooLarge(PayloadError):
    """The payload is over the configured size; it was not parsed."""


class TooManyReadings(PayloadError):
    """The payload expands into more readings than one message may."""


class OutputTooLarge(PayloadError):
    """The records of one message together take more bytes than one message may produce."""


@dataclass(frozen=True, slots=True)
class PayloadLimits:
    """What one message may cost: bytes before parsing, readings after, bytes produced."""

    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_readings: int = DEFAULT_MAX_READINGS
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES

    def check_size(self, payload: bytes) -> None:
        """Raise :class:`PayloadTooLarge` before anything reads a payload over ``max_bytes``."""
        if len(payload) > self.max_bytes:
            raise PayloadTooLarge(f"payload is {len(payload)} bytes, over the limit of {self.max_bytes} bytes")

    def check_count(self, count: int) -> None:
        if count > self.max_readings:
            raise TooManyReadings(f"payload holds more than {self.max_readings} readings (the limit per message)")

    def check_output(self, produced: int, records: int) -> None:
        """Raise :class:`OutputTooLarge` once ``records`` records take ``produced`` bytes over the limit.

        Called as the records are built, so a message over it costs at most the limit in memory."""
        if produced > self.max_output_bytes:
            raise OutputTooLarge(
                f"message expands into {records} records taking {produced} bytes so far, over the limit of "
                f"{self.max_output_bytes} bytes (values, keys, headers) per message"
            )


def header_bytes(headers: Iterable[tuple[str, bytes | str | None]]) -> int:
    """What ``headers`` add to each record they are on (names and values)."""
    return sum(len(name) + len(value or b"") for name, value in headers)


DEFAULT_LIMITS = PayloadLimits()


class LimitSettings(Group):
    """What one input may cost; the same group in every gateway (``*_LIMITS__*``)."""

    max_payload_bytes: int = Field(
        DEFAULT_MAX_PAYLOAD_BYTES, ge=1, le=KAFKA_DEFAULT_MAX_BYTES, description="larger payloads are not parsed"
    )
    max_readings: int = Field(DEFAULT_MAX_READINGS, ge=1, description="readings one message may expand into")
    max_output_bytes: int = Field(
        DEFAULT_MAX_OUTPUT_BYTES,
        ge=1,
        description="bytes (values, keys, headers) the records of one message may take together; more: dead letter",
    )
    deadletter_head_bytes: int = Field(
        DEFAULT_HEAD_BYTES, ge=0, le=64 * 1024, description="payload bytes a bounded dead letter keeps"
    )

    def payload_limits(self) -> PayloadLimits:
        return PayloadLimits(self.max_payload_bytes, self.max_readings, self.max_output_bytes)
