"""Dead letters: the original bytes, untouched, with why they were rejected in headers.

Nothing that arrives is dropped: a payload we cannot parse or a reading that fails
validation goes to the dead-letter topic, where an operator can read the reason, fix
the device or the rule, and replay it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from fluxgate_core import metrics
from fluxgate_core.kafka import AsyncProducer, Headers

REASON = "fluxgate.dlq.reason"
ERROR_CLASS = "fluxgate.dlq.error.class"
SOURCE = "fluxgate.dlq.source"
SERVICE = "fluxgate.dlq.service"
TIMESTAMP = "fluxgate.dlq.timestamp"
MAX_REASON_BYTES = 4096


def dead_letter_headers(
    *, reason: str, error_class: str, source: str, service: str, now_ms: int | None = None
) -> list[tuple[str, bytes]]:
    """The headers that explain a dead letter; the reason is truncated to stay header-sized."""
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    return [
        (REASON, reason.encode("utf-8", "replace")[:MAX_REASON_BYTES]),
        (ERROR_CLASS, error_class.encode()),
        (SOURCE, source.encode("utf-8", "replace")),
        (SERVICE, service.encode()),
        (TIMESTAMP, str(stamp).encode()),
    ]


class DeadLetterWriter:
    """Sends rejected input to one topic and waits for Kafka to confirm it."""

    def __init__(self, producer: AsyncProducer, topic: str, service: str) -> None:
        self._producer = producer
        self.topic = topic
        self._service = service

    async def send(
        self,
        payload: bytes,
        *,
        error: BaseException,
        source: str,
        key: bytes | str | None = None,
        headers: Headers | Sequence[tuple[str, bytes]] = (),
    ) -> None:
        """Dead-letter ``payload`` because of ``error``; the original headers are kept too."""
        explained = dead_letter_headers(
            reason=str(error) or type(error).__name__,
            error_class=type(error).__name__,
            source=source,
            service=self._service,
        )
        metrics.DEAD_LETTERS.labels(type(error).__name__).inc()
        await self._producer.deliver(self.topic, payload, key=key, headers=[*headers, *explained])
