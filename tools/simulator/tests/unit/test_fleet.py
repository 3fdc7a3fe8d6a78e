"""Fleet mode without a broker: the schedule (each device once a period, within the jitter,
at N / P, the same with a seed) and the fault fractions, through a fake MQTT fleet."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, cast

import pytest

from fluxgate_sim.faults import Faults, Reading
from fluxgate_sim.fleet import (
    BUCKET_S,
    MAX_COAP_DEVICES,
    Fleet,
    FleetConfig,
    FleetSchedule,
    Progress,
    fleet_coap_names,
    fleet_device_name,
)
from fluxgate_sim.mqtt import MqttFleet

STEP_S = 0.05


def drive(schedule: FleetSchedule, until_s: float, step_s: float = STEP_S) -> list[tuple[float, int]]:
    """(the time it was handed out, position) for every report due by ``until_s``."""
    out: list[tuple[float, int]] = []
    for tick in range(int(until_s / step_s) + 1):
        now = tick * step_s
        out += [(now, position) for position in schedule.due(now)]
    return out


@pytest.mark.parametrize("devices", [1, 7, 1000, 1024])
def test_every_device_exactly_once_per_period_within_the_jitter(devices: int) -> None:
    period, jitter = 10.0, 0.1
    schedule = FleetSchedule(devices, period, jitter, seed=5)
    sent = drive(schedule, 3 * period + 2 * jitter * period)
    by_cycle: dict[int, list[int]] = defaultdict(list)
    for at, position in sent:
        by_cycle[position // devices].append(schedule.device_at(position))
        drift = at - schedule.nominal_s(position)
        assert -jitter * period - BUCKET_S <= drift <= jitter * period + STEP_S + BUCKET_S
    for cycle in (1, 2):
        assert sorted(by_cycle[cycle]) == list(range(devices))  # each device once, none twice
    # The run starts mid-life: of the periods it began in, the reports jittered before 0 were
    # sent before it; the others go out once.
    for cycle in (-1, 0):
        assert len(set(by_cycle[cycle])) == len(by_cycle[cycle])
    assert len(by_cycle[0]) >= 0.85 * devices


def test_the_rate_is_devices_over_period() -> None:
    devices, period = 20_000, 10.0
    schedule = FleetSchedule(devices, period, 0.2, seed=1)
    assert schedule.rate == 2000.0
    sent = drive(schedule, 30.0)
    # From the start every period carries N reports (the run begins at full rate), and every
    # second about N / P (jitter moves a report by up to 2 s, so seconds vary a little).
    per_period = Counter(int(at // period) for at, _ in sent if at < 30)
    assert all(abs(count - devices) < 0.01 * devices for count in per_period.values()), per_period
    per_second = Counter(int(at) for at, _ in sent if at < 30)
    assert all(abs(count - 2000) < 250 for count in per_second.values()), per_second


def test_a_seed_fixes_the_schedule_however_often_it_is_asked() -> None:
    fine = [position for _, position in drive(FleetSchedule(5000, 5.0, 0.1, seed=9), 12.0, step_s=0.01)]
    coarse = [position for _, position in drive(FleetSchedule(5000, 5.0, 0.1, seed=9), 12.0, step_s=0.5)]
    other = [position for _, position in drive(FleetSchedule(5000, 5.0, 0.1, seed=10), 12.0, step_s=0.5)]
    assert fine == coarse
    assert fine != other
    places = [FleetSchedule(5000, 5.0, seed=9).device_at(k) for k in range(5000)]
    assert places != list(range(5000))  # hashed, not in id order


def test_a_million_devices_keep_only_the_next_seconds_in_memory() -> None:
    schedule = FleetSchedule(1_000_000, 60.0, 0.1, seed=2)
    due = sum(1 for _ in schedule.due(1.0))
    pending = sum(len(bucket) for bucket in schedule._buckets.values())
    assert due == pytest.approx(1_000_000 / 60, rel=0.05)  # full rate from the first second
    # Kept: the reports of the next 2 * jitter * period seconds at the most, 8 bytes each.
    assert pending < 2 * 6.0 * 1_000_000 / 60
    assert FleetSchedule(1_000_000, 60.0).device_at(999_999) < 1_000_000


def test_bad_schedules_are_refused() -> None:
    with pytest.raises(ValueError, match="jitter"):
        FleetSchedule(10, 1.0, 0.5)
    with pytest.raises(ValueError, match="device"):
        FleetConfig(devices=0)
    with pytest.raises(ValueError, match="metrics"):
        FleetConfig(devices=1, metrics=("pressure",))


def test_device_names_have_a_fixed_width() -> None:
    assert fleet_device_name(0, 1_000_000) == "fleet-0000001"
    assert fleet_device_name(999_999, 1_000_000, "soak1-") == "soak1-fleet-1000000"
    assert fleet_device_name(0, 20_000_000) == "fleet-00000001"


class FakeMqtt:
    """What ``send_mqtt`` needs of an :class:`MqttFleet`: ``root`` and ``publish_reading``."""

    root = "sensors"

    def __init__(self) -> None:
        self.sent: list[tuple[int, Reading, bytes | None]] = []

    def publish_reading(self, device_index: int, reading: Reading, payload: bytes | None = None) -> None:
        self.sent.append((device_index, reading, payload))


def run_fleet(config: FleetConfig, periods: int) -> tuple[Fleet, FakeMqtt]:
    fleet, mqtt = Fleet(config), FakeMqtt()
    until = (periods + 2 * config.jitter) * config.period  # the last period's late-jittered ones too

    async def drive_reports() -> None:
        for tick in range(int(until / STEP_S) + 1):
            for position in fleet.schedule.due(tick * STEP_S):
                await fleet.report(cast(MqttFleet, mqtt), position, tick * STEP_S)
        await fleet.release_held(cast(MqttFleet, mqtt))

    asyncio.run(drive_reports())
    fleet.ledger.close()
    return fleet, mqtt


def test_fault_fractions_in_fleet_mode(tmp_path: Path) -> None:
    faults = Faults(out_of_order=0.05, late=0.05, duplicates=0.05, malformed=0.05, late_by_ms=60_000)
    config = FleetConfig(devices=4000, period=1.0, faults=faults, seed=3, ledger=tmp_path / "ledger.jsonl")
    fleet, mqtt = run_fleet(config, periods=3)
    reports = fleet.reports
    assert reports >= 2 * 4000
    kinds = fleet.stats
    assert kinds["malformed"] / reports == pytest.approx(0.05, abs=0.01)
    assert kinds["late"] / reports == pytest.approx(0.05 * 0.95, abs=0.01)
    assert kinds["duplicate"] / reports == pytest.approx(0.05 * 0.95, abs=0.01)
    assert kinds["out_of_order"] / reports == pytest.approx(0.05 * 0.95, abs=0.015)
    assert fleet.held == 0
    entries = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert len(entries) == len(mqtt.sent) == sum(kinds.values())
    assert Counter(entry["k"] for entry in entries) == kinds
    assert all(("bad" in entry) == (entry["k"] == "malformed") for entry in entries)


def test_out_of_order_goes_after_the_same_devices_next_reading() -> None:
    config = FleetConfig(devices=500, period=1.0, faults=Faults(out_of_order=0.2), seed=4)
    _, mqtt = run_fleet(config, periods=4)
    newest: dict[str, int] = {}
    behind = 0
    for _, reading, _ in mqtt.sent:
        if reading.seq < newest.get(reading.device, 0):
            behind += 1
        newest[reading.device] = max(newest.get(reading.device, 0), reading.seq)
    assert behind > 0
    seqs = Counter((reading.device, reading.seq) for _, reading, _ in mqtt.sent)
    assert max(seqs.values()) == 1  # held, never lost or doubled


def test_each_device_publishes_through_its_own_hub_on_its_own_topic() -> None:
    config = FleetConfig(devices=100, period=1.0, seed=1, metrics=("temperature", "humidity"))
    fleet, mqtt = run_fleet(config, periods=2)
    devices: dict[str, set[int]] = defaultdict(set)
    for index, reading, _ in mqtt.sent:
        assert reading.device == fleet.device_name(index)
        devices[reading.device].add(index)
    assert len(devices) == 100 and all(len(indices) == 1 for indices in devices.values())
    first = min((reading.seq, reading.metric) for _, reading, _ in mqtt.sent if reading.device == "fleet-0000001")
    assert first in ((1, "temperature"), (3, "temperature"), (5, "temperature"))  # by the cycle it begins in
    assert all(reading.seq % 2 == (reading.metric == "temperature") for _, reading, _ in mqtt.sent)


def test_values_depend_on_the_seed_not_on_object_state() -> None:
    def values(seed: int) -> list[Any]:
        _, mqtt = run_fleet(FleetConfig(devices=50, period=1.0, seed=seed), periods=1)
        return [(reading.device, reading.value) for _, reading, _ in mqtt.sent]

    assert values(8) == values(8) != values(9)


def test_it_says_when_it_cannot_keep_up_not_when_it_stalls_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fluxgate_sim.fleet")
    fleet = Fleet(FleetConfig(devices=1000, period=10.0, report_every=5.0))
    progress = Progress(fleet, started=0.0)
    for tick in range(100):  # one 3 s stall, caught up at the next hand-out
        progress.maybe_log(tick * 0.05, 3.0 if tick == 40 else 0.05)
    assert fleet.fell_behind == 0
    for tick in range(100, 220):  # behind at every hand-out of an interval
        progress.maybe_log(tick * 0.05, 1.5 + tick * 0.01)
    assert fleet.fell_behind >= 1
    assert "cannot keep up" in caplog.text
    assert "target=100.0/s" in caplog.text


def test_the_last_ids_speak_coap_each_update_its_own_notification(tmp_path: Path) -> None:
    faults = Faults(duplicates=0.2, malformed=0.1, out_of_order=0.1)
    config = FleetConfig(devices=50, coap_devices=5, period=1.0, seed=6, faults=faults, ledger=tmp_path / "l.jsonl")
    fleet, mqtt = run_fleet(config, periods=3)
    entries = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    coap = [entry for entry in entries if entry["p"] == "coap"]
    names = fleet_coap_names(50, 5)
    assert names == [f"fleet-{index:07d}" for index in range(46, 51)]
    assert {entry["d"] for entry in coap} == set(names)
    assert all(entry["src"] == f"/sensors/{entry['d']}/temperature" for entry in coap)
    assert len(coap) + len(mqtt.sent) == len(entries) == sum(fleet.stats.values())
    assert not {reading.device for _, reading, _ in mqtt.sent} & set(names)
    assert sum(fleet.coap_server.resource(name, "temperature").updates for name in names) == len(coap)
    resources = fleet.coap_server.resources_config()
    assert len(resources) == 5 and resources[0]["uri"].endswith("/sensors/fleet-0000046/temperature")


def test_the_coap_share_is_bounded() -> None:
    with pytest.raises(ValueError, match="coap_devices"):
        FleetConfig(devices=1_000_000, coap_devices=MAX_COAP_DEVICES + 1)
    with pytest.raises(ValueError, match="coap_devices"):
        FleetConfig(devices=10, coap_devices=11)


def test_shards_split_the_ids_and_together_are_the_fleet() -> None:
    reported: Counter[str] = Counter()
    coap: set[str] = set()
    for shard in range(3):
        config = FleetConfig(devices=1001, period=1.0, jitter=0.0, seed=4, shard=(shard, 3), coap_devices=10)
        fleet, mqtt = run_fleet(config, periods=2)
        assert fleet.schedule.rate == pytest.approx((1001 - shard + 2) // 3)
        for index, reading, _ in mqtt.sent:
            assert reading.device == fleet.device_name(index) and index % 3 == shard
            reported[reading.device] += 1
        coap |= {resource["uri"].split("/")[4] for resource in fleet.coap_server.resources_config()}
    assert len(reported) + len(coap) == 1001 and not set(reported) & coap
    assert coap == set(fleet_coap_names(1001, 10))
    # No jitter: one report a period each (and the first places of the third period, due in
    # the 10 ms bucket that holds 2.0 s).
    assert set(reported.values()) <= {2, 3} and sum(count == 3 for count in reported.values()) <= 20
    with pytest.raises(ValueError, match="shard"):
        FleetConfig(devices=2, shard=(2, 2))
