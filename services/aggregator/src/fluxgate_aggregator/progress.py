"""Streaming progress as Prometheus metrics."""

from __future__ import annotations

from typing import Any

import structlog
from prometheus_client import Counter, Gauge
from pyspark.sql.streaming.listener import StreamingQueryListener

from fluxgate_aggregator.driver_state import JobState
from fluxgate_aggregator.progress_commits import ProgressCommitter, processed

log = structlog.get_logger(__name__)
INPUT_RATE = Gauge("fluxgate_aggregator_input_rows_per_second", "Input rate of the last batch", ["query"])
PROCESS_RATE = Gauge("fluxgate_aggregator_processed_rows_per_second", "Processing rate of the last batch", ["query"])
BATCH_SECONDS = Gauge("fluxgate_aggregator_batch_duration_seconds", "Duration of the last batch", ["query"])
STATE_ROWS = Gauge("fluxgate_aggregator_state_rows", "Readings held in the window and deduplication state")
LATE_ROWS = Gauge("fluxgate_aggregator_late_rows", "Late readings counted (and written to the late topic)")
DEAD_LETTERS = Gauge("fluxgate_aggregator_dead_letters", "Undecodable records sent to the dead-letter topic")
# Spark's own split of each trigger (latestOffset, getBatch, queryPlanning, addBatch = our
# foreachBatch, walCommit, commitOffsets, triggerExecution = the whole), summed.
TRIGGER_SECONDS = Counter(
    "fluxgate_aggregator_trigger_seconds", "Spark's durationMs of every micro-batch, summed, by part", ["part"]
)
WATERMARK = Gauge("fluxgate_aggregator_watermark_seconds", "Event-time watermark of the aggregation (epoch s)")
CONSUMER_LAG = Gauge(
    "fluxgate_aggregator_consumer_lag",
    "Input records not read yet after the last batch (the newest offset Kafka had minus the batch's end offset)",
    ["topic", "partition"],
)


class ProgressListener(StreamingQueryListener):
    """Runs in the driver after every micro-batch of every query."""

    def __init__(self, state: JobState, committer: ProgressCommitter | None = None) -> None:
        self._state = state
        self._committer = committer
        self._runs: set[str] = set()  # the query runs whose first batch was logged

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - pyspark's API
        log.info("query.started", name=event.name, id=str(event.id))

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        progress = event.progress
        name = progress.name or "unnamed"
        self._log_first_batch(progress)
        INPUT_RATE.labels(name).set(progress.inputRowsPerSecond or 0.0)
        PROCESS_RATE.labels(name).set(progress.processedRowsPerSecond or 0.0)
        BATCH_SECONDS.labels(name).set((progress.batchDuration or 0) / 1000)
        for part, millis in (progress.durationMs or {}).items():
            TRIGGER_SECONDS.labels(part).inc(millis / 1000)
        state = self._state
        LATE_ROWS.set(state.late_rows)
        DEAD_LETTERS.set(state.dead_letters)
        STATE_ROWS.set(state.ledger_rows)
        if state.watermark_ms is not None:
            WATERMARK.set(state.watermark_ms / 1000)
        for source in progress.sources:
            show_lag(source.endOffset, getattr(source, "latestOffset", None))
            if self._committer is not None:
                self._committer.commit(source.endOffset)

    def _log_first_batch(self, progress: Any) -> None:
        """The first batch of each run of a query, with Spark's split of its time: after a
        start it pays for code generation, the connectors' first requests and the checkpoint's
        read-back, and is what a restart's recovery waits on (later batches are in the metrics)."""
        run = str(getattr(progress, "runId", ""))
        if run in self._runs:
            return
        self._runs.add(run)
        parts = {f"{part}_s": millis / 1000 for part, millis in (progress.durationMs or {}).items()}
        log.info("query.first_batch", name=progress.name, batch=getattr(progress, "batchId", None),
                 rows=getattr(progress, "numInputRows", None), **parts)  # fmt: skip

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        return

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        log.info("query.terminated", id=str(event.id), error=event.exception)


def show_lag(end_offset: str | None, latest_offset: str | None) -> None:
    """A Kafka source's lag per partition, from its progress: ``latestOffset`` (what Kafka
    had when the batch was planned) minus ``endOffset`` (where the batch stopped reading;
    below the latest when ``max_offsets_per_trigger`` caps a batch). Another source has none."""
    latest = {(tp.topic, tp.partition): tp.offset for tp in processed(latest_offset)}
    for tp in processed(end_offset):
        if (tp.topic, tp.partition) in latest:
            lag = max(0, latest[(tp.topic, tp.partition)] - tp.offset)
            CONSUMER_LAG.labels(tp.topic, str(tp.partition)).set(lag)
