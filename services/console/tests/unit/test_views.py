"""The page's data (flow, per-service state, lag, figures) from recorded answers, failed first."""

from __future__ import annotations

import time

import pytest
from console_recorded import READY, RecordedKafka, Services, metrics_text

from fluxgate_console.deadletters import DeadLetterBook
from fluxgate_console.kafka_state import kafka_state
from fluxgate_console.refresh import Console
from fluxgate_console.settings import ConsoleSettings
from fluxgate_console.view import flow, lag_growth
from fluxgate_console.web import ago


async def refreshed(settings: ConsoleSettings, kafka: RecordedKafka, services: Services) -> Console:
    console = Console(settings, kafka, DeadLetterBook(settings.deadletters), client=services.client())
    await console.refresh()
    return console


async def test_failed_first_each_with_its_reason(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    console = await refreshed(settings, kafka, services)
    order = [(v.name, v.state) for v in console.snapshot.services]
    assert order[0] == ("coap-ingest", "down")
    assert {n for n, s in order[1:3]} == {"es-persister", "scylla-persister"}
    assert all(s == "ready" for _, s in order[3:])
    reasons = {v.name: v.reason for v in console.snapshot.services}
    assert "Connection refused" in reasons["coap-ingest"]
    assert reasons["scylla-persister"].startswith("/metrics unreadable")
    assert console.snapshot.failing == 4  # three services and scylla's group Kafka did not describe


async def test_lag_per_group_and_partition(settings: ConsoleSettings, kafka: RecordedKafka, services: Services) -> None:
    console = await refreshed(settings, kafka, services)
    views = {v.name: v for v in console.snapshot.services}
    es = views["es-persister"].group
    assert es is not None and es.lag == 2400
    assert [(p.partition, p.lag, p.owner) for p in es.partitions] == [(0, 800, "client-0"), (1, 800, "client-0"),
                                                                       (2, 800, "client-0")]  # fmt: skip
    status = views["device-status"].group
    assert status is not None and status.lag == 10 and len(status.members) == 2
    scylla = views["scylla-persister"].group
    assert scylla is not None and scylla.error and "TIMED_OUT" in scylla.error  # only that group fails


async def test_lag_growing_is_piling_up(settings: ConsoleSettings, kafka: RecordedKafka, services: Services) -> None:
    console = await refreshed(settings, kafka, services)
    kafka.ends["temperatures.aggregated"] = {0: 1000, 1: 1000, 2: 1000}
    await console.refresh()
    views = {v.name: v for v in console.snapshot.services}
    assert views["es-persister"].piling_up  # 300 more behind than a refresh ago
    assert views["hazelcast-persister"].piling_up  # committed stayed at 900 while the topic grew
    assert not views["aggregator"].piling_up


async def test_key_figures_as_the_services_expose_them(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    console = await refreshed(settings, kafka, services)
    figures = {v.name: {f.label: (f.value, f.kind) for f in v.figures} for v in console.snapshot.services}
    assert figures["mqtt-proxy"]["dead letters"] == (120, "count")
    assert figures["mqtt-proxy"]["broker connected"] == (1, "flag")
    assert figures["aggregator"]["watermark"] == (1.7000003e9, "epoch")
    assert figures["es-persister"]["store up"] == (0, "flag")
    assert figures["device-status"]["devices online"] == (24, "count")
    assert figures["coap-ingest"] == {} and figures["scylla-persister"] == {}


async def test_kafka_down_is_one_part_the_services_still_show(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    kafka.down = True
    console = await refreshed(settings, kafka, services)
    assert console.snapshot.kafka.error and "Broker transport failure" in console.snapshot.kafka.error
    assert {v.name: v.state for v in console.snapshot.services}["mqtt-proxy"] == "ready"
    assert not console.ready()


async def test_flow_is_drawn_by_stage(settings: ConsoleSettings, kafka: RecordedKafka, services: Services) -> None:
    console = await refreshed(settings, kafka, services)
    columns = flow(console.snapshot.services)
    drawn = [[v.name for v in c.services] or list(c.topics) for c in columns]
    assert drawn == [
        ["coap-ingest", "mqtt-proxy"],
        ["sensors.readings"],
        ["aggregator", "device-status"],
        ["temperatures.aggregated"],
        ["es-persister", "hazelcast-persister", "scylla-persister"],
    ]


async def test_rates_from_two_refreshes(settings: ConsoleSettings, kafka: RecordedKafka, services: Services) -> None:
    console = await refreshed(settings, kafka, services)
    first_at = console.snapshot.kafka.at
    kafka.ends["sensors.readings"] = {0: 4100, 1: 4100, 2: 3980}
    await console.refresh()
    elapsed = console.snapshot.kafka.at - first_at
    assert console.snapshot.topic_rates["sensors.readings"] == 300 / elapsed


def test_kafka_state_without_the_topic_yet(kafka: RecordedKafka) -> None:
    state = kafka_state(kafka, ["sensors.readings", "no.such.topic"], {"fluxgate-aggregator": ["no.such.topic"]})
    assert "no.such.topic" not in state.ends
    assert state.groups["fluxgate-aggregator"].partitions == ()


def test_a_micro_batch_consumers_sawtooth_lag_is_not_piling_up() -> None:
    # Lag rises for a 5 s trigger and drops to ~0 when the batch commits; sampled every 2 s.
    sawtooth = [(t, (t % 5) * 70.0) for t in range(0, 60, 2)]
    assert sawtooth[-1][1] > sawtooth[0][1]  # the two ends alone would say "growing"
    growth = lag_growth(sawtooth)
    assert growth is not None and growth <= 0
    # The same job falling behind: every trough higher than the last.
    behind = [(t, (t % 5) * 70.0 + 20.0 * t) for t in range(0, 60, 2)]
    growth = lag_growth(behind)
    assert growth is not None and growth > 10
    assert lag_growth([(0.0, 5.0)]) is None


async def test_a_watermark_ahead_of_the_wall_clock_needs_attention_and_says_so(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    """A device whose clock runs an hour ahead moves the aggregator's watermark an hour past
    the wall clock; every service stays ready. The page used to show it as "0s ago"."""
    ahead = time.time() + 3600
    services.answers[9103] = (200, READY, metrics_text("aggregator").replace("1.7000003e+09", f"{ahead:.3f}"))
    console = await refreshed(settings, kafka, services)
    [alert] = console.snapshot.alerts
    assert (alert.kind, alert.service) == ("clock ahead", "aggregator")
    assert alert.text.startswith("watermark 59m") or alert.text.startswith("watermark 1h 0m")
    assert console.snapshot.failing == 5  # the four parts failing before, and this
    assert ago(ahead).endswith("ahead of the clock") and "ago" not in ago(ahead)


async def test_a_watermark_in_the_past_is_no_alert(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    console = await refreshed(settings, kafka, services)
    assert console.snapshot.alerts == []


async def test_a_late_share_far_above_normal_needs_attention(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    """Late readings counted from Kafka itself: the late topic's rate over the input's."""
    kafka.ends["temperatures.late"] = {0: 0, 1: 0, 2: 0}
    console = await refreshed(settings, kafka, services)
    kafka.ends["sensors.readings"] = {0: 4100, 1: 4100, 2: 3980}  # 300 more readings
    kafka.ends["temperatures.late"] = {0: 60, 1: 60, 2: 57}  # 177 of them late: 59 %
    await console.refresh()
    [alert] = console.snapshot.alerts
    assert (alert.kind, alert.service) == ("late", "aggregator")
    assert alert.text.startswith("59% of its input went late")


async def test_a_normal_late_share_is_no_alert(
    settings: ConsoleSettings, kafka: RecordedKafka, services: Services
) -> None:
    kafka.ends["temperatures.late"] = {0: 0, 1: 0, 2: 0}
    console = await refreshed(settings, kafka, services)
    kafka.ends["sensors.readings"] = {0: 4100, 1: 4100, 2: 3980}
    kafka.ends["temperatures.late"] = {0: 1, 1: 1, 2: 1}  # 1 %
    await console.refresh()
    assert console.snapshot.alerts == []
    views = {v.name: v for v in console.snapshot.services}
    # two rates over the same elapsed time: equal to 3 / 300 up to the last bits of the division
    assert views["aggregator"].late_share == pytest.approx(3 / 300)
