"""The console's own Prometheus metrics, beside the core's (process, Kafka client)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

SCRAPES = Counter("fluxgate_console_scrapes_total", "Service instances asked, by the state they were in", ["state"])
REFRESH_SECONDS = Histogram(
    "fluxgate_console_refresh_seconds", "Time to ask every service, Kafka and the stores once",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)  # fmt: skip
PARTS_FAILING = Gauge("fluxgate_console_parts_failing", "Parts of the page whose last refresh failed")
REPLAYED = Counter("fluxgate_console_replayed_total", "Dead letters sent back to their source topic")
REPLAY_FAILURES = Counter("fluxgate_console_replay_failures_total", "Replays aborted (nothing of them committed)")
DEAD_LETTERS_READ = Counter("fluxgate_console_dead_letters_read_total", "Dead letters read", ["topic"])
