"""Input offsets lost before they were read: found from where a batch starts and the
partition's watermarks, reported once, kept as the job's degraded reason for a while."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from fluxgate_aggregator.losses import Loss, LossWatch, batch_starts, lost

# An offset log entry as Spark 4.1 writes it: version, the batch's metadata, one line per source.
ENTRY = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"sensors.readings":{"1":7,"0":120}}'


def test_a_batch_starts_where_the_offset_log_says_the_one_before_ended() -> None:
    assert batch_starts(ENTRY) == {("sensors.readings", 0): 120, ("sensors.readings", 1): 7}
    assert batch_starts(None) == {} and batch_starts("v1\n{}\nnot json") == {}


@pytest.mark.parametrize(
    ("start", "low", "high", "want"),
    [
        (120, 451, 900, Loss("t", 0, 120, 450)),  # retention or DeleteRecords moved the start past unread offsets
        (120, 120, 900, None),  # nothing removed that was not read
        (120, 0, 120, None),  # nothing new
        (120, 100, 130, None),  # a compacted or transactional partition: its start never moves past them
        (450, 0, 30, Loss("t", 0, 450, None)),  # recreated: the partition went back
    ],
)
def test_only_offsets_removed_before_the_batch_read_them_are_lost(
    start: int, low: int, high: int, want: Loss | None
) -> None:
    assert lost(("t", 0), start, low, high) == want


def test_a_loss_is_counted_logged_and_kept_as_the_reason_until_it_expires() -> None:
    now = [1000.0]
    watch = LossWatch(lambda topic, partition: (451, 900) if partition == 0 else (0, 9), 60.0, lambda: now[0])
    before = REGISTRY.get_sample_value("fluxgate_aggregator_offsets_lost_total", {"topic": "t", "partition": "0"})
    with capture_logs() as logs:
        assert watch.check(7, {("t", 0): 120, ("t", 1): 3}) == [Loss("t", 0, 120, 450)]
        assert watch.check(7, {("t", 0): 120, ("t", 1): 3}) == [], "a batch run again reports nothing twice"
    after = REGISTRY.get_sample_value("fluxgate_aggregator_offsets_lost_total", {"topic": "t", "partition": "0"})
    assert (after or 0) - (before or 0) == 331
    (line,) = [entry for entry in logs if entry["event"] == "aggregator.offsets_lost"]
    assert (line["topic"], line["partition"], line["first"], line["last"], line["count"]) == ("t", 0, 120, 450, 331)
    assert line["log_level"] == "error"
    assert watch.active() == ["offsets 120-450 of t/0 were lost before they were read"]
    now[0] += 59
    assert watch.active() and REGISTRY.get_sample_value("fluxgate_aggregator_data_loss_alerts") == 1
    now[0] += 1
    assert watch.active() == [] and REGISTRY.get_sample_value("fluxgate_aggregator_data_loss_alerts") == 0


def test_kafka_not_answering_skips_the_check_and_fails_nothing() -> None:
    def away(topic: str, partition: int) -> tuple[int, int]:
        raise RuntimeError("KafkaError{code=_TRANSPORT}")

    watch = LossWatch(away, 60.0)
    assert watch.check(3, {("t", 0): 10}) == [] and watch.active() == []
