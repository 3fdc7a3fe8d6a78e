"""Prometheus metrics shared by every service (each service adds its own beside these).

Names follow ``fluxgate_<what>_<unit>``; labels stay low-cardinality (topic, reason
class), never device ids.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECORDS_IN = Counter("fluxgate_records_in_total", "Input messages received", ["source"])
RECORDS_OUT = Counter("fluxgate_records_out_total", "Records Kafka confirmed", ["topic"])
DEAD_LETTERS = Counter("fluxgate_dead_letters_total", "Records sent to the dead-letter topic", ["reason"])
KAFKA_IN_FLIGHT = Gauge("fluxgate_kafka_in_flight", "Records produced but not yet confirmed by Kafka")
KAFKA_DELIVERY_ERRORS = Counter("fluxgate_kafka_delivery_errors_total", "Records Kafka rejected", ["topic"])
END_TO_END_LATENCY = Histogram(
    "fluxgate_ingest_latency_seconds",
    "From receiving an input message to Kafka's acknowledgement",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
