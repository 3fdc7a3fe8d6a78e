"""The offsets a finished batch processed, as the consumer group commit gets them."""

from __future__ import annotations

import pytest

from fluxgate_aggregator.progress_commits import processed


def test_a_kafka_sources_end_offset_becomes_one_commit_per_partition() -> None:
    offsets = processed('{"sensors.readings": {"0": 12, "2": 7, "1": 0}}')
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in offsets) == [
        ("sensors.readings", 0, 12),
        ("sensors.readings", 1, 0),
        ("sensors.readings", 2, 7),
    ]


def test_anything_but_a_kafka_sources_offsets_commits_nothing() -> None:
    for end_offset in (None, "", "not json", "42", '{"logOffset": 3}', '{"t": {"0": -1}}'):
        assert processed(end_offset) == [], end_offset


def test_sparks_split_of_each_trigger_is_summed_by_part() -> None:
    from types import SimpleNamespace

    from prometheus_client import REGISTRY

    from fluxgate_aggregator.driver_state import JobState
    from fluxgate_aggregator.progress import ProgressListener

    def seconds(part: str) -> float:
        return REGISTRY.get_sample_value("fluxgate_aggregator_trigger_seconds_total", {"part": part}) or 0.0

    before = seconds("addBatch"), seconds("triggerExecution")
    listener = ProgressListener(JobState())
    for add, whole in ((1200, 1500), (300, 400)):
        progress = SimpleNamespace(
            name="aggregates",
            inputRowsPerSecond=1.0,
            processedRowsPerSecond=1.0,
            batchDuration=whole,
            durationMs={"addBatch": add, "triggerExecution": whole},
            sources=[],
        )
        listener.onQueryProgress(SimpleNamespace(progress=progress))
    # Other tests in this process may have counted before: the difference, to float precision.
    assert seconds("addBatch") - before[0] == pytest.approx(1.5)
    assert seconds("triggerExecution") - before[1] == pytest.approx(1.9)


def test_a_kafka_sources_lag_is_its_latest_offset_minus_where_the_batch_stopped() -> None:
    from prometheus_client import REGISTRY

    from fluxgate_aggregator.progress import show_lag

    def lag(partition: int) -> float | None:
        return REGISTRY.get_sample_value(
            "fluxgate_aggregator_consumer_lag", {"topic": "lag-test", "partition": str(partition)}
        )

    # A batch capped by max_offsets_per_trigger stopped short of what Kafka had on partition 0.
    show_lag('{"lag-test": {"0": 100, "1": 50}}', '{"lag-test": {"0": 160, "1": 50}}')
    assert (lag(0), lag(1)) == (60, 0)
    show_lag('{"logOffset": 3}', None)  # not Kafka: nothing shown, nothing changed
    assert lag(0) == 60


def test_the_first_batch_of_each_run_is_logged_with_sparks_split_of_its_time() -> None:
    from types import SimpleNamespace

    from structlog.testing import capture_logs

    from fluxgate_aggregator.driver_state import JobState
    from fluxgate_aggregator.progress import ProgressListener

    def batch(run: str, batch_id: int) -> SimpleNamespace:
        progress = SimpleNamespace(name="aggregates", runId=run, batchId=batch_id, numInputRows=40,
                                   inputRowsPerSecond=1.0, processedRowsPerSecond=1.0, batchDuration=52_000,
                                   durationMs={"addBatch": 48_000, "triggerExecution": 52_000}, sources=[])  # fmt: skip
        return SimpleNamespace(progress=progress)

    listener = ProgressListener(JobState())
    with capture_logs() as logs:
        for event in (batch("run-1", 7), batch("run-1", 8), batch("run-2", 9), batch("run-2", 10)):
            listener.onQueryProgress(event)
    firsts = [entry for entry in logs if entry["event"] == "query.first_batch"]
    assert [(entry["batch"], entry["addBatch_s"], entry["triggerExecution_s"]) for entry in firsts] == [
        (7, 48.0, 52.0),
        (9, 48.0, 52.0),  # a restart is a new run: its first batch is logged too
    ]
