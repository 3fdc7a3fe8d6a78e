"""Streaming progress as Prometheus metrics, and the watermark the side outputs need."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog
from prometheus_client import Counter, Gauge
from pyspark.sql.streaming.listener import StreamingQueryListener

from fluxgate_aggregator.job import JobState

log = structlog.get_logger(__name__)
INPUT_RATE = Gauge("fluxgate_aggregator_input_rows_per_second", "Input rate of the last batch", ["query"])
PROCESS_RATE = Gauge("fluxgate_aggregator_processed_rows_per_second", "Processing rate of the last batch", ["query"])
BATCH_SECONDS = Gauge("fluxgate_aggregator_batch_duration_seconds", "Duration of the last batch", ["query"])
STATE_ROWS = Gauge("fluxgate_aggregator_state_rows", "Rows held in the windowing state")
DROPPED_LATE = Counter("fluxgate_aggregator_rows_dropped_by_watermark_total", "Rows Spark dropped as late")
LATE_ROWS = Gauge("fluxgate_aggregator_late_rows", "Late readings counted (and written to the late topic)")
DEAD_LETTERS = Gauge("fluxgate_aggregator_dead_letters", "Undecodable records sent to the dead-letter topic")
WATERMARK = Gauge("fluxgate_aggregator_watermark_seconds", "Event-time watermark of the aggregation (epoch s)")


class ProgressListener(StreamingQueryListener):
    """Runs in the driver after every micro-batch of every query."""

    def __init__(self, state: JobState) -> None:
        self._state = state

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - pyspark's API
        log.info("query.started", name=event.name, id=str(event.id))

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        progress = event.progress
        name = progress.name or "unnamed"
        INPUT_RATE.labels(name).set(progress.inputRowsPerSecond or 0.0)
        PROCESS_RATE.labels(name).set(progress.processedRowsPerSecond or 0.0)
        BATCH_SECONDS.labels(name).set((progress.batchDuration or 0) / 1000)
        LATE_ROWS.set(self._state.late_rows)
        DEAD_LETTERS.set(self._state.dead_letters)
        if name == "aggregates":
            self._aggregation_progress(progress)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        return

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        log.info("query.terminated", id=str(event.id), error=event.exception)

    def _aggregation_progress(self, progress: Any) -> None:
        for operator in progress.stateOperators or []:
            STATE_ROWS.set(operator.numRowsTotal)
            DROPPED_LATE.inc(operator.numRowsDroppedByWatermark or 0)
        watermark = (progress.eventTime or {}).get("watermark")
        if watermark:
            millis = int(datetime.fromisoformat(watermark.replace("Z", "+00:00")).timestamp() * 1000)
            self._state.watermark_ms = millis
            WATERMARK.set(millis / 1000)
