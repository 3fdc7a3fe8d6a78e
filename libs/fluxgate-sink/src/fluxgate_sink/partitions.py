"""Per-partition state of the runner: records waiting, the batch being written, paused or not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.kafka import PartitionKey

# Batches a partition may hold beside the one being written before its fetching pauses.
# Not one: librdkafka drops what it prefetched for a paused partition and fetches it again
# on resume, and pausing at every batch starved the writes of records (half the throughput).
WAITING_BATCHES = 3
# How long a partition may stay full, while the store takes writes, before its fetching pauses;
# until then the runner waits for its write instead of polling. A pause makes librdkafka drop
# what it prefetched for the partition and fetch it again on resume: in a backlog, where
# decoding outruns writing, partitions paused and resumed at every batch and each record was
# fetched several times.
PAUSE_AFTER_S = 1.0


@dataclass(slots=True)
class PartitionState:
    """Records of one partition in offset order; at most one batch of them being written."""

    tp: PartitionKey
    batch_size: int
    batch_age: float
    waiting: list[ConsumedRecord] = field(default_factory=list)
    oldest: float = 0.0
    writing: asyncio.Task[None] | None = None
    writing_end: int = -1  # the offset to commit once ``writing`` succeeds
    writing_count: int = 0  # records in the batch being written
    paused: bool = False
    full_since: float = 0.0  # when it became full (0: it is not)

    def extend(self, records: Iterable[ConsumedRecord]) -> None:
        """Records after those waiting, in offset order."""
        if not self.waiting:
            self.oldest = time.monotonic()
        self.waiting.extend(records)

    def due(self, now: float, squeezed: bool = False) -> bool:
        """A batch is due when it is full or its oldest record waited long enough (and none is being
        written), or at once when the process holds too much (``squeezed``): a partition paused
        before its batch filled would otherwise sit out ``batch_age``."""
        if self.writing is not None or not self.waiting:
            return False
        return squeezed or len(self.waiting) >= self.batch_size or now - self.oldest >= self.batch_age

    def take(self) -> list[ConsumedRecord]:
        batch, self.waiting = self.waiting[: self.batch_size], self.waiting[self.batch_size :]
        self.oldest = time.monotonic() if self.waiting else 0.0
        self.writing_end = batch[-1].offset + 1
        self.writing_count = len(batch)
        return batch

    @property
    def held(self) -> int:
        """Records taken from Kafka and not yet written: waiting, and the batch being written."""
        return len(self.waiting) + (self.writing_count if self.writing is not None else 0)

    @property
    def full(self) -> bool:
        """Enough waiting for several batches while one is being written: time to pause fetching."""
        return self.writing is not None and len(self.waiting) >= WAITING_BATCHES * self.batch_size
