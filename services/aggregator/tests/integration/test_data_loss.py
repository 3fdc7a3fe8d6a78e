"""Issue 35 §4: input offsets removed from Kafka before the job read them (here by
DeleteRecords while the job was down, as retention does) are skipped, as before, but loudly:
counted, logged with the topic, partition and offsets, and the job reports itself degraded
with the reason, which the console's summary lists under "Needs attention"."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import structlog
from aggregator_reference import reading
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from fluxgate_aggregator import losses
from fluxgate_aggregator.app import AggregatorJob
from fluxgate_aggregator.settings import WindowSettings
from fluxgate_console.scrape import readiness
from fluxgate_core.lifecycle import _health
from fluxgate_core.settings import HttpSettings

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
S = 1_000


def produce(producer: Producer, devices: Any, topic: str, partition: int, records: list[dict[str, Any]]) -> None:
    for record in records:
        producer.produce(topic, devices.encoder.encode(record), key=record["device_id"].encode(), partition=partition)
    assert producer.flush(10) == 0


def transactional_markers(stack: Any, devices: Any, topic: str) -> None:
    """Two committed transactions on partition 1: offsets that hold markers, not records."""
    producer = Producer({"bootstrap.servers": stack.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}"})
    producer.init_transactions(10)
    for second in (3, 4):
        producer.begin_transaction()
        produce(producer, devices, topic, 1, [reading("d2", BASE_MS + second * S, 30.0)])
        producer.commit_transaction(10)


def test_offsets_deleted_before_they_were_read_are_counted_logged_and_make_the_job_degraded(
    stack: Any, topics: Any, devices: Any, settings_for: Any, run_job: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A logger not used yet: the module's own was cached on first use by whatever test of this
    # process logged a loss before, and capture_logs then saw nothing (a CI run, by test order).
    monkeypatch.setattr(losses, "log", structlog.get_logger(losses.__name__))
    settings = settings_for(WindowSettings(size="10 seconds", watermark="5 seconds"))
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    produce(producer, devices, topics.input, 0, [reading("d1", BASE_MS + 1 * S, 20.0)])  # offset 0
    first = run_job(settings)
    first.wait_for_watermark(BASE_MS - 4 * S)
    first.stop()  # down, while retention removes what it has not read

    produce(producer, devices, topics.input, 0, [reading("d1", BASE_MS + t * S, 20.0 + t) for t in range(2, 13)])
    transactional_markers(stack, devices, topics.input)
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})  # kept referenced until its answer came
    (deleted,) = admin.delete_records([TopicPartition(topics.input, 0, 11)]).values()
    assert deleted.result(30).low_watermark == 11, "offsets 1-10 gone unread; 11 is still there"

    with capture_logs() as logs:
        again = run_job(settings)  # resumes from the checkpoint: partition 0 at offset 1
        again.wait_for_watermark(BASE_MS + 7 * S)  # offset 11 (12 s) read, nothing before it

    def lost_in(partition: str) -> float | None:
        labels = {"topic": topics.input, "partition": partition}
        return REGISTRY.get_sample_value("fluxgate_aggregator_offsets_lost_total", labels)

    assert (lost_in("0"), lost_in("1")) == (10, None), "transaction markers are no loss"
    (line,) = [entry for entry in logs if entry["event"] == "aggregator.offsets_lost"]
    where = (line["topic"], line["partition"], line["first"], line["last"], line["count"])
    assert where == (topics.input, 0, 1, 10, 10)
    reason = f"offsets 1-10 of {topics.input}/0 were lost before they were read"
    assert again.state.losses.active() == [reason]

    # The service's own health endpoint, as `fluxgate-aggregator run` serves it, and the
    # console's reading of it: the aggregator is not "ready", so the summary lists it.
    job = AggregatorJob(settings)
    job._state = again.state
    assert job.attention() == [reason]
    health = _health(job, HttpSettings(host="127.0.0.1", port=0))  # as run_service serves it
    try:
        answer = httpx.get(f"http://127.0.0.1:{health.port}/readyz")
    finally:
        health.stop()
    state, why = readiness(answer.status_code, answer.text)
    assert (answer.status_code, state) == (503, "degraded")
    assert reason in why  # the console's "Needs attention" names the offsets lost
    again.assert_running()
