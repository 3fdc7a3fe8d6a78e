"""What a consumer hands out: one record, its coordinates, and its decoded value."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from fluxgate_core.errors import FluxgateError

PartitionKey = tuple[str, int]
"""``(topic, partition)``."""
RecordHeaders = tuple[tuple[str, bytes | None], ...]


class Decoder(Protocol):
    """Turns a record value into a dict; raises a retriable FluxgateError when it may work later."""

    def decode(self, data: bytes) -> dict[str, Any]: ...


class ConsumedRecord(NamedTuple):
    """One record read from Kafka: the raw bytes, and the decoded value or why it did not decode.

    ``headers`` keeps every header in the order the producer wrote them, repeats included.
    A named tuple, not a frozen dataclass: one is made per record consumed, and a frozen
    dataclass's ``__init__`` (an ``object.__setattr__`` per field) cost 1.35 µs of the
    Hazelcast persister's ~11 µs per record, a tuple 0.23 µs.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: RecordHeaders
    timestamp_ms: int
    record: dict[str, Any] | None = None
    error: FluxgateError | None = None
    # The key as a sink's transforms (fluxgate_sink.transforms) left it, in a 1-tuple (a key may be
    # null); None: no transform read or changed it, so ``key`` is read in the sink's key format.
    transformed_key: tuple[Any] | None = None

    @property
    def source(self) -> str:
        """``topic/partition/offset``: where a dead letter says it came from."""
        return f"{self.topic}/{self.partition}/{self.offset}"

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name`` (None when absent or null)."""
        for key, value in reversed(self.headers):
            if key == name:
                return value
        return None
