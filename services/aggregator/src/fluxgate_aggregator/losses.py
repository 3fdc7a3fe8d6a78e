"""Offsets of the input topic lost before the job read them, made loud.

The Kafka source runs with ``failOnDataLoss=false``: offsets that retention or a
DeleteRecords removed (or a recreated topic took away) before a batch read them are skipped
with at most a WARN of Spark's. The job keeps that: a query failing on them would fail again
at every restart, since those records are gone for good, and the readings after them would
wait forever. But before each batch reads anything it compares, per partition, where the
batch starts (the previous batch's end, from the query's offset log) with the first offset
Kafka still holds (the low watermark): the offsets between were never read. Compacted
records and transaction markers never move the low watermark, so they are never reported.
Each loss is counted (``fluxgate_aggregator_offsets_lost_total``), logged
(``aggregator.offsets_lost`` with topic, partition and offsets) and, for
``data_loss_alert_seconds`` or until the job restarts, keeps the job degraded with its reason.

Not seen: records removed in the moment between this check and the batch's fetch (Spark
logs those itself).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition
from prometheus_client import Counter, Gauge

from fluxgate_aggregator.settings import AggregatorSettings

log = structlog.get_logger(__name__)
Partition = tuple[str, int]
Watermarks = Callable[[str, int], tuple[int, int]]  # (low, high) of a partition, asked of Kafka now
OFFSETS_LOST = Counter(
    "fluxgate_aggregator_offsets_lost",
    "Input offsets removed from Kafka (retention, DeleteRecords) before the job read them",
    ["topic", "partition"],
)
LOSS_ALERTS = Gauge("fluxgate_aggregator_data_loss_alerts", "Losses of input offsets the job still reports as degraded")


@dataclass(frozen=True)
class Loss:
    """Offsets ``first`` to ``last`` of a partition, never read; ``last`` None: the partition
    now ends before ``first`` (recreated or truncated), so where the lost part ended is unknown."""

    topic: str
    partition: int
    first: int
    last: int | None

    @property
    def reason(self) -> str:
        where = f"{self.topic}/{self.partition}"
        if self.last is None:
            return f"offsets from {self.first} of {where} were lost before they were read (the partition went back)"
        return f"offsets {self.first}-{self.last} of {where} were lost before they were read"


def lost(partition: Partition, start: int, low: int, high: int) -> Loss | None:
    """What a batch starting at ``start`` cannot read of a partition holding ``low``..``high - 1``."""
    if low > start:
        return Loss(*partition, start, low - 1)
    if high < start:
        return Loss(*partition, start, None)
    return None


def batch_starts(offset_log_entry: str | None) -> dict[Partition, int]:
    """A Kafka source's offsets in one entry of Spark's offset log (``v1``, the batch's
    metadata, then one JSON line per source: topic -> partition -> offset); empty without one."""
    starts: dict[Partition, int] = {}
    for line in (offset_log_entry or "").splitlines()[2:]:
        try:
            topics = json.loads(line)
        except ValueError:
            continue
        if not isinstance(topics, dict):
            continue
        for topic, partitions in topics.items():
            if isinstance(partitions, dict):
                starts.update({(topic, int(p)): int(o) for p, o in partitions.items() if isinstance(o, int)})
    return starts


class LossWatch:
    """Checks each batch before it reads; remembers each loss for ``alert_s`` seconds."""

    def __init__(self, watermarks: Watermarks, alert_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._watermarks = watermarks
        self._alert_s = alert_s
        self._clock = clock
        self._alerts: dict[Loss, float] = {}  # -> when it was found
        self._lock = threading.Lock()  # the query's thread reports, the health server's reads

    def check(self, batch_id: int, starts: dict[Partition, int]) -> list[Loss]:
        """The losses a batch starting at ``starts`` meets, each reported once."""
        found = []
        for partition, start in sorted(starts.items()):
            try:
                low, high = self._watermarks(*partition)
            except Exception as exc:  # Kafka not answering: the next batch checks again
                log.warning("aggregator.watermarks_unknown", topic=partition[0], partition=partition[1], error=str(exc))
                continue
            loss = lost(partition, start, low, high)
            if loss is not None and self._remember(loss):
                self._report(loss, batch_id)
                found.append(loss)
        return found

    def _remember(self, loss: Loss) -> bool:
        """True the first time ``loss`` is met (a batch run again after a failure meets it again)."""
        with self._lock:
            if loss in self._alerts:
                return False
            self._alerts[loss] = self._clock()
            return True

    def active(self) -> list[str]:
        """The reasons still reported, oldest first."""
        now = self._clock()
        with self._lock:
            self._alerts = {loss: at for loss, at in self._alerts.items() if now - at < self._alert_s}
            LOSS_ALERTS.set(len(self._alerts))
            return [loss.reason for loss in self._alerts]

    def _report(self, loss: Loss, batch_id: int) -> None:
        count = None if loss.last is None else loss.last - loss.first + 1
        if count is not None:
            OFFSETS_LOST.labels(loss.topic, str(loss.partition)).inc(count)
        LOSS_ALERTS.set(len(self._alerts))
        log.error("aggregator.offsets_lost", topic=loss.topic, partition=loss.partition, first=loss.first,
                  last=loss.last, count=count, batch=batch_id, reason=loss.reason)  # fmt: skip


class KafkaWatermarks:
    """A partition's low and high watermarks, asked of Kafka (a consumer that never joins its group)."""

    def __init__(self, settings: AggregatorSettings, timeout_s: float = 5.0) -> None:
        config = settings.kafka.consumer_config("fluxgate-aggregator-watermarks", "fluxgate-aggregator-watermarks")
        self._consumer = Consumer(config)
        self._timeout_s = timeout_s

    def __call__(self, topic: str, partition: int) -> tuple[int, int]:
        low, high = self._consumer.get_watermark_offsets(KafkaPartition(topic, partition), self._timeout_s)
        return int(low), int(high)

    def close(self) -> None:
        self._consumer.close()
