"""Prometheus metrics of the sink runtime; ``target`` is the KCQL target (never a daily index name)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

WRITTEN = Counter("fluxgate_sink_records_written_total", "Records the store confirmed", ["target"])
REJECTED = Counter("fluxgate_sink_records_rejected_total", "Records the store refused for good", ["target"])
DEAD_LETTERED = Counter(
    "fluxgate_sink_records_dead_lettered_total", "Records sent to the dead-letter topic", ["target"]
)
FILTERED = Counter(
    "fluxgate_sink_records_filtered_total", "Records a Filter transform dropped (committed, not written)", ["transform"]
)
RETRIED = Counter("fluxgate_sink_records_retried_total", "Records written again after a failure", ["target"])
BATCH_SIZE = Histogram(
    "fluxgate_sink_batch_size", "Records per write", buckets=(1, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
)
WRITE_LATENCY = Histogram(
    "fluxgate_sink_write_seconds",
    "Time of one write_batch call",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
STORE_UP = Gauge("fluxgate_sink_store_up", "1 while the store takes writes, 0 while it is down or overloaded")
LAG = Gauge(
    "fluxgate_sink_consumer_lag", "Records in Kafka not yet committed by this persister", ["topic", "partition"]
)
COMMITTED = Counter("fluxgate_sink_offsets_committed_total", "Offset commits after a written batch")
HELD = Gauge("fluxgate_sink_records_held", "Records taken from Kafka and not yet written (bounded by max_held_records)")
