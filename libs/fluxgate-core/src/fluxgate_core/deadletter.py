"""Dead letters: the original bytes, untouched, with why they were rejected in headers.

Nothing that arrives is dropped: a payload we cannot parse or a reading that fails
validation goes to the dead-letter topic, where an operator can read the reason, fix
the device or the rule, and replay it.

What cannot go whole (over the writer's ``max_whole_bytes``, or refused by Kafka for
good, typically for its size) goes *bounded*: the first ``head_bytes`` of the payload,
with its full size and SHA-256 in headers, so one oversized input can never stop a
gateway and an operator can still tell which payload it was.

Every header under ``fluxgate.`` is ours, and a reader trusts it (the console takes a
replay's target from ``fluxgate.dlq.topic``). So a header of that namespace that came with
the input (a record read back from a dead-letter topic, a header a device slipped through)
is kept renamed ``received.<name>``: nothing is lost, and nothing passes as ours. What a
caller writes itself about the input (a sink's provenance) goes in ``described``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

import structlog

from fluxgate_core import metrics
from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.kafka import AsyncProducer, Headers
from fluxgate_core.limits import DEFAULT_HEAD_BYTES

log = structlog.get_logger(__name__)

REASON = "fluxgate.dlq.reason"
ERROR_CLASS = "fluxgate.dlq.error.class"
SOURCE = "fluxgate.dlq.source"
SERVICE = "fluxgate.dlq.service"
TIMESTAMP = "fluxgate.dlq.timestamp"
TRUNCATED = "fluxgate.dlq.payload.truncated"
PAYLOAD_SIZE = "fluxgate.dlq.payload.size"
PAYLOAD_SHA256 = "fluxgate.dlq.payload.sha256"
BOUNDED_BECAUSE = "fluxgate.dlq.bounded.reason"
HEADERS_DROPPED = "fluxgate.dlq.headers.dropped"
# A sink's dead letter also says where the refused record was read from and what it was for.
SOURCE_TOPIC = "fluxgate.dlq.topic"
SOURCE_PARTITION = "fluxgate.dlq.partition"
SOURCE_OFFSET = "fluxgate.dlq.offset"
TARGET = "fluxgate.dlq.target"
RESERVED_PREFIX = "fluxgate."  # our header namespace: what a dead letter's reader trusts
RECEIVED_PREFIX = "received."  # what an input's own header of that namespace is renamed under
MAX_REASON_BYTES = 4096
MAX_KEPT_HEADER_BYTES = 4096  # of the input's own headers (MQTT user properties can be huge too)
MAX_KEY_BYTES = 1024


def dead_letter_headers(
    *, reason: str, error_class: str, source: str, service: str, now_ms: int | None = None
) -> list[tuple[str, bytes]]:
    """The headers that explain a dead letter; the reason is truncated to stay header-sized."""
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    return [
        (REASON, reason.encode("utf-8", "replace")[:MAX_REASON_BYTES]),
        (ERROR_CLASS, error_class.encode()),
        (SOURCE, source.encode("utf-8", "replace")[:MAX_REASON_BYTES]),
        (SERVICE, service.encode()),
        (TIMESTAMP, str(stamp).encode()),
    ]


def bounded_headers(payload: bytes, because: str, headers: Headers | Sequence[tuple[str, bytes]] = ()) -> Headers:
    """The headers of a bounded dead letter: what the payload was, and the input's own
    headers as long as they stay under :data:`MAX_KEPT_HEADER_BYTES` (the count of the rest)."""
    kept: list[tuple[str, bytes | str | None]] = []
    budget = MAX_KEPT_HEADER_BYTES
    for name, value in headers:
        budget -= len(name) + len(value or b"")
        if budget >= 0:
            kept.append((name, value))
    described: list[tuple[str, bytes | str | None]] = [
        (TRUNCATED, b"true"),
        (PAYLOAD_SIZE, str(len(payload)).encode()),
        (PAYLOAD_SHA256, hashlib.sha256(payload).hexdigest().encode()),
        (BOUNDED_BECAUSE, because.encode("utf-8", "replace")[:MAX_REASON_BYTES]),
    ]
    if len(kept) < len(headers):
        described.append((HEADERS_DROPPED, str(len(headers) - len(kept)).encode()))
    return [*kept, *described]


def received_headers(headers: Headers | Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes | str | None]]:
    """The input's own headers, those in our reserved namespace renamed under :data:`RECEIVED_PREFIX`."""
    return [(RECEIVED_PREFIX + name if name.startswith(RESERVED_PREFIX) else name, value) for name, value in headers]


def bounded_key(key: bytes | str | None) -> bytes | str | None:
    if isinstance(key, str):
        key = key.encode("utf-8", "replace")
    return key[:MAX_KEY_BYTES] if key is not None else None


class DeadLetterWriter:
    """Sends rejected input to one topic and waits for Kafka to confirm it.

    ``max_whole_bytes``: payloads over it go bounded without trying (None: always try
    whole first); ``head_bytes``: how much of the payload a bounded dead letter keeps.
    """

    def __init__(
        self,
        producer: AsyncProducer,
        topic: str,
        service: str,
        *,
        max_whole_bytes: int | None = None,
        head_bytes: int = DEFAULT_HEAD_BYTES,
    ) -> None:
        self._producer = producer
        self.topic = topic
        self._service = service
        self._max_whole_bytes = max_whole_bytes
        self._head_bytes = head_bytes

    async def send(
        self,
        payload: bytes,
        *,
        error: BaseException,
        source: str,
        key: bytes | str | None = None,
        headers: Headers | Sequence[tuple[str, bytes]] = (),
        described: Headers | Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        """Dead-letter ``payload`` because of ``error``; the original ``headers`` are kept too
        (renamed when in our namespace), then ``described``: the caller's own about the input.

        Raises only when not even the bounded dead letter was taken (or Kafka is away):
        the dead-letter topic itself is wrong, which no single input can be blamed for.
        """
        headers = self._own_headers(headers, described)
        explained = dead_letter_headers(
            reason=str(error) or type(error).__name__,
            error_class=type(error).__name__,
            source=source,
            service=self._service,
        )
        metrics.DEAD_LETTERS.labels(type(error).__name__).inc()
        if self._max_whole_bytes is not None and len(payload) > self._max_whole_bytes:
            because = f"payload of {len(payload)} bytes is over {self._max_whole_bytes} bytes"
            await self._send_bounded(payload, because, key, headers, explained)
            return
        try:
            await self._producer.deliver(self.topic, payload, key=key, headers=[*headers, *explained])
        except FluxgateError as exc:
            if exc.retriable or isinstance(exc, ConfigError):
                raise
            because = f"the whole dead letter was refused: {exc}"
            await self._send_bounded(payload, because, key, headers, explained)

    def _own_headers(
        self, headers: Headers | Sequence[tuple[str, bytes]], described: Headers | Sequence[tuple[str, bytes]] | None
    ) -> Headers:
        return [*received_headers(headers), *(described or ())]

    async def _send_bounded(
        self,
        payload: bytes,
        because: str,
        key: bytes | str | None,
        own: Headers | Sequence[tuple[str, bytes]],
        explained: Sequence[tuple[str, bytes]],
    ) -> None:
        log.warning("deadletter.bounded", topic=self.topic, size=len(payload), because=because)
        # Our explaining headers are bounded already: only the input's own go through the budget.
        headers = [*bounded_headers(payload, because, own), *explained]
        await self._producer.deliver(self.topic, payload[: self._head_bytes], key=bounded_key(key), headers=headers)
