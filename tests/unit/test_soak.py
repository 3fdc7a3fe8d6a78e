"""The soak run's schedule and its check's rules, on made-up ledgers and topics (no servers)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from run_pipeline import Names
from soak import Fault, append_ledger, fleet_argv, parse_args, schedule
from soak_check import (
    Check,
    CutOff,
    FaultWindow,
    Identity,
    Result,
    Sent,
    compare,
    expected_windows,
    late_arrivals,
    readings,
    stats,
    to_ms,
    without_lost_with_member,
)

from fluxgate_sim.faults import Emission, Reading
from fluxgate_sim.fleet import Fleet, FleetConfig
from fluxgate_sim.runner import Ledger
from fluxgate_stack import endpoints

WINDOW_MS = 10_000


def test_the_schedule_takes_every_pair_once_before_any_twice_and_a_seed_replays_it() -> None:
    targets, kinds = ["kafka", "mqtt-proxy", "aggregator"], ["kill", "stop"]
    plan = schedule(7, targets, kinds, 9, kill_down=5, stop_for=60)
    assert len(plan) == 9
    assert {(f.target, f.kind) for f in plan[:6]} == {(t, k) for t in targets for k in kinds}
    assert all(f.hold == (5 if f.kind == "kill" else 60) for f in plan)
    assert schedule(7, targets, kinds, 9, 5, 60) == plan
    assert schedule(8, targets, kinds, 9, 5, 60) != plan
    assert plan[0] == Fault(plan[0].target, plan[0].kind, plan[0].hold)


def entry(protocol: str, device: str, t: int, value: float, seq: int, sent_ms: int, kind: str = "ok") -> dict[str, Any]:
    source = f"soak/{device}/temperature" if protocol == "mqtt" else f"/sensors/{device}/temperature"
    return {"p": protocol, "src": source, "d": device, "m": "temperature", "t": t, "v": value, "s": seq, "k": kind,
            "w": sent_ms}  # fmt: skip


def key(e: dict[str, Any]) -> Identity:
    return (e["d"], e["m"], e["t"], float(e["v"]), e["s"])


def sent_of(*entries: dict[str, Any]) -> Sent:
    sent = Sent()
    for e in entries:
        sent.good.setdefault(key(e), e)
    return sent


def spec(faults: list[FaultWindow] | None = None, whole_from_ms: int = 0) -> Check:
    return Check(Path("ledger"), endpoints(), "p-", "a", "t", faults or [], WINDOW_MS, "p-watermark",
                 whole_from_ms=whole_from_ms)  # fmt: skip


def test_the_ledger_the_simulator_writes_is_the_one_the_check_reads(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    reading = Reading("d1", "temperature", 21.5, 1_000, 1)
    ledger.write("mqtt", "sensors/d1/temperature", Emission(reading))
    ledger.write("mqtt", "sensors/d1/temperature", Emission(reading, kind="duplicate"))
    ledger.write("coap", "/sensors/d1/temperature", Emission(reading, malformed=True, kind="malformed"), b"{bad")
    ledger.write("mqtt", "sensors/w/temperature", Emission(Reading("w", "temperature", 0.0, 9, 1)))
    ledger.close()
    sent = Sent.read(tmp_path / "ledger.jsonl", excluded="w")
    assert list(sent.good) == [("d1", "temperature", 1_000, 21.5, 1)]  # a duplicate is one reading
    assert sent.broken == Counter({b"{bad": 1})
    assert sent.emissions == Counter({"ok": 1, "duplicate": 1, "malformed": 1})


def test_spark_conf_adds_to_the_drivers_loopback_properties_and_refuses_a_pair_without_a_value() -> None:
    args = parse_args(["--spark-conf", "spark.executor.extraJavaOptions=-Da=b", "--spark-conf", "spark.x=1=2"])
    assert args.spark_conf == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.extraJavaOptions": "-Da=b",
        "spark.x": "1=2",
    }
    with pytest.raises(SystemExit):
        parse_args(["--spark-conf", "spark.executor.cores"])


def test_a_soaks_fleet_is_a_fleet_command_and_its_ledger_joins_the_devices_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fluxgate_sim import cli

    args = parse_args(["--fleet-devices", "1000", "--fleet-period", "30", "--seed", "3"])
    argv = fleet_argv(args, Names("soak1-"), tmp_path / "fleet-ledger.jsonl")
    assert argv[1:4] == ["fleet", "--devices", "1000"] and "--ledger" in argv
    assert argv[argv.index("--device-prefix") + 1] == "soak1-"
    help_text = CliRunner().invoke(cli.app, ["fleet", "--help"], terminal_width=200).output
    assert all(option in help_text for option in argv[1:] if option.startswith("--"))
    fleet = Fleet(FleetConfig(devices=3, period=1.0, seed=1, ledger=tmp_path / "fleet-ledger.jsonl"))
    reading = Reading("soak1-fleet-0000001", "temperature", 21.5, 1_000, 1)
    fleet.ledger.write("mqtt", "soak1/soak1-fleet-0000001/temperature", Emission(reading))
    fleet.ledger.close()
    devices = Ledger(tmp_path / "ledger.jsonl")
    devices.write(
        "mqtt", "soak1/soak1-mqtt-0001/temperature", Emission(Reading("soak1-mqtt-0001", "temperature", 20.0, 1_000, 1))
    )
    devices.close()
    append_ledger(tmp_path / "ledger.jsonl", tmp_path / "fleet-ledger.jsonl")
    append_ledger(tmp_path / "ledger.jsonl", tmp_path / "no-fleet.jsonl")  # no fleet: nothing
    sent = Sent.read(tmp_path / "ledger.jsonl", excluded="soak1-watermark")
    assert {identity[0] for identity in sent.good} == {"soak1-mqtt-0001", "soak1-fleet-0000001"}


def test_a_coap_reading_sent_while_cut_off_may_be_missing_an_mqtt_one_never() -> None:
    fault = FaultWindow("coap-ingest", "stop", start_ms=1_000, end_ms=2_000, whole_ms=9_000)
    store = FaultWindow("elasticsearch", "kill", start_ms=5_000, end_ms=6_000, whole_ms=9_000)
    before = entry("coap", "c1", 500, 1.0, 1, sent_ms=500)
    during = entry("coap", "c1", 1_500, 2.0, 2, sent_ms=1_500)
    after_end = entry("coap", "c1", 2_200, 3.0, 3, sent_ms=2_200)  # its resource had not resumed yet
    resumed = entry("coap", "c1", 2_500, 4.0, 4, sent_ms=2_500)
    later = entry("coap", "c1", 3_000, 5.0, 5, sent_ms=3_000)
    during_store_fault = entry("coap", "c1", 5_500, 6.0, 6, sent_ms=5_500)
    mqtt = entry("mqtt", "m1", 1_500, 7.0, 1, sent_ms=1_500)
    sent = sent_of(before, during, after_end, resumed, later, during_store_fault, mqtt)
    arrived = Counter([key(before), key(resumed)])
    cut = CutOff.of([fault, store], sent, arrived)
    assert cut.excused(during) == fault
    assert cut.excused(after_end) == fault
    assert cut.excused(later) is None  # after its resource's observation was back
    assert cut.excused(during_store_fault) is None  # a store's fault never keeps a reading from Kafka
    assert cut.excused(mqtt) is None  # the broker keeps QoS 1 messages: none may be missing
    assert cut.longest_gap_ms() == {"stop coap-ingest at 1000": 500}


def test_coap_readings_a_killed_gateway_held_are_cut_off_only_after_the_last_that_arrived() -> None:
    """The long run's coap-0002 humidity reading, sent 0.3 s before coap-ingest was SIGKILLed
    and never on the topic: the gateway held it, nothing sends it again. One missing before
    a later reading of its resource that arrived stays lost, and so does one long before."""
    kill = FaultWindow("coap-ingest", "kill", start_ms=10_000, end_ms=13_000, whole_ms=20_000)
    stop = FaultWindow("coap-ingest", "stop", start_ms=30_000, end_ms=90_000, whole_ms=95_000)
    long_before = entry("coap", "c2", 4_000, 1.0, 1, sent_ms=4_000)
    arrived_last = entry("coap", "c2", 9_000, 2.0, 2, sent_ms=9_000)
    held = entry("coap", "c2", 9_700, 3.0, 3, sent_ms=9_700)
    observed = entry("coap", "c1", 1_000, 4.5, 1, sent_ms=1_000)  # each resource observed from the start
    observed_too = entry("coap", "c2", 1_000, 0.5, 0, sent_ms=1_000)
    gap = entry("coap", "c1", 9_200, 4.0, 2, sent_ms=9_200)  # c1's next reading arrived: a loss
    after_gap = entry("coap", "c1", 9_500, 5.0, 3, sent_ms=9_500)
    resumed = entry("coap", "c2", 14_000, 6.0, 4, sent_ms=14_000)
    before_stop = entry("coap", "c2", 29_800, 7.0, 5, sent_ms=29_800)  # a stopped gateway keeps what it holds
    mqtt = entry("mqtt", "m1", 9_700, 8.0, 1, sent_ms=9_700)
    sent = sent_of(observed, observed_too, long_before, arrived_last, held, gap, after_gap, resumed, before_stop, mqtt)
    arrived = Counter([key(observed), key(observed_too), key(arrived_last), key(after_gap), key(resumed)])
    cut = CutOff.of([kill, stop], sent, arrived)
    assert [cut.excused(e) for e in (held, gap, long_before, before_stop, mqtt)] == [kill, None, None, None, None]
    result = Result()
    readings(spec([kill, stop]), sent, arrived, Counter(), cut, result)
    assert result.figures["readings_cut_off"] == {"coap in flight at kill coap-ingest": 1}
    assert "lost readings by protocol: {'coap': 3, 'mqtt': 1}" in result.problems


def test_a_lost_or_invented_reading_and_a_late_one_written_twice_or_never_are_problems() -> None:
    ok = entry("mqtt", "m1", 1_000, 1.0, 1, sent_ms=1_000)
    lost = entry("mqtt", "m1", 2_000, 2.0, 2, sent_ms=2_000)
    late_once = entry("mqtt", "m1", 3_000, 3.0, 3, sent_ms=5_000, kind="late")
    late_twice = entry("mqtt", "m1", 3_100, 4.0, 4, sent_ms=5_000, kind="late")
    late_never = entry("mqtt", "m1", 3_200, 5.0, 5, sent_ms=5_000, kind="late")
    sent = sent_of(ok, lost, late_once, late_twice, late_never)
    invented: Identity = ("m9", "temperature", 1, 1.0, 1)
    arrived = Counter([key(ok), key(ok), key(late_once), key(late_twice), key(late_never), invented])
    late = Counter({key(late_once): 1, key(late_twice): 2})
    result = Result()
    readings(spec(), sent, arrived, late, CutOff.of([], sent, arrived), result)
    text = "\n".join(result.problems)
    assert "lost: mqtt reading ('m1', 'temperature', 2000" in text
    assert "lost readings by protocol: {'mqtt': 1}" in text
    assert "1 readings on the topic nobody sent" in text
    assert "1 readings on the late topic more than once" in text
    assert "1 late readings not on the late topic" in text
    assert result.figures["readings_repeated_on_topic"] == 1  # at least once: a repeat is no problem
    clean = Result()
    readings(spec(whole_from_ms=6_000), sent_of(ok), Counter([key(ok)]), Counter(), CutOff([]), clean)
    assert clean.passed


def test_a_late_arrival_written_again_by_a_batch_run_again_is_counted_apart_a_second_arrival_is_not() -> None:
    """A rehearsal's flake (2026-11-30): the aggregator, SIGKILLed after a batch wrote its late readings and before
    Spark recorded its commit, ran the batch again and wrote them again (at least once, as its
    windows), the same record with the same ingest time. A second arrival written late is a copy
    the job should have known."""

    def on_late(device: str, seq: int, ingest_ms: int) -> dict[str, Any]:
        return {"device_id": device, "metric": "temperature", "event_time": 1_000, "value": 1.0, "sequence": seq,
                "ingest_time": ingest_ms}  # fmt: skip

    rewritten, copied = on_late("m1", 1, 5_000), on_late("m1", 2, 5_000)
    ingested = {("m1", "temperature", 1_000, 1.0, 1): 5_000, ("m1", "temperature", 1_000, 1.0, 2): 5_000}
    result = Result()
    late, first_late, copy_after = late_arrivals([rewritten, rewritten, copied, on_late("m1", 2, 9_000)], ingested,
                                                 result)  # fmt: skip
    assert late == Counter({("m1", "temperature", 1_000, 1.0, 1): 1, ("m1", "temperature", 1_000, 1.0, 2): 2})
    assert first_late == Counter({("m1", "temperature", 1_000, 1.0, 1): 1, ("m1", "temperature", 1_000, 1.0, 2): 1})
    assert copy_after == {("m1", "temperature", 1_000, 1.0, 2): 4_000}
    assert result.figures["late_rewritten_by_a_batch_run_again"]["count"] == 1


def test_each_window_counts_a_reading_once_leaves_the_late_ones_out_and_a_cut_off_coap_one() -> None:
    first = entry("mqtt", "m1", 1_000, 20.0, 1, sent_ms=1_000)
    second = entry("mqtt", "m1", 9_999, 22.0, 2, sent_ms=9_999)
    next_window = entry("mqtt", "m1", 10_000, 30.0, 3, sent_ms=10_000)
    late = entry("mqtt", "m1", 2_000, 99.0, 4, sent_ms=30_000, kind="late")
    coap_lost = entry("coap", "m1", 3_000, 50.0, 5, sent_ms=3_000)
    humidity = {**entry("mqtt", "m1", 1_000, 60.0, 6, sent_ms=1_000), "m": "humidity"}
    sent = sent_of(first, second, second, next_window, late, coap_lost, humidity)
    arrived = Counter([key(first), key(second), key(next_window), key(late)])
    cut = CutOff.of([FaultWindow("kafka", "kill", 2_500, 4_000, 5_000)], sent, arrived)
    windows = expected_windows(spec(), sent, arrived, Counter([key(late)]), cut)
    assert windows == {("m1", 0): stats([20.0, 22.0]), ("m1", 10_000): stats([30.0])}
    assert windows[("m1", 0)] == {"count": 2, "min": 20.0, "max": 22.0, "mean": 21.0, "stddev": 1.0}


def test_an_mqtt_reading_sent_while_the_broker_was_killed_may_be_missing_not_while_the_gateway_was() -> None:
    # The device gets no PUBACK while its broker is dead; a gateway's fault is the pipeline's own.
    broker = FaultWindow("mosquitto", "kill", start_ms=1_000, end_ms=2_000, whole_ms=9_000)
    gateway = FaultWindow("mqtt-proxy", "kill", start_ms=5_000, end_ms=6_000, whole_ms=9_000)
    stopped = FaultWindow("mosquitto", "stop", start_ms=7_000, end_ms=8_000, whole_ms=9_000)
    during = entry("mqtt", "m1", 1_500, 1.0, 1, sent_ms=1_500)
    resumed = entry("mqtt", "m1", 2_100, 2.0, 2, sent_ms=2_100)
    during_gateway = entry("mqtt", "m1", 5_500, 3.0, 3, sent_ms=5_500)
    during_stop = entry("mqtt", "m1", 7_500, 4.0, 4, sent_ms=7_500)  # its socket kept it
    sent = sent_of(during, resumed, during_gateway, during_stop)
    cut = CutOff.of([broker, gateway, stopped], sent, Counter([key(resumed)]))
    # (only readings that did not arrive are ever asked about: `resumed` arrived)
    assert [cut.excused(e) for e in (during, during_gateway, during_stop)] == [broker, None, None]
    result = Result()
    readings(spec([broker, gateway, stopped]), sent, Counter([key(resumed)]), Counter(), cut, result)
    assert result.figures["readings_cut_off"] == {"mqtt during kill mosquitto": 1}
    assert "lost readings by protocol: {'mqtt': 2}" in result.problems


def test_a_coap_reading_sent_in_the_millisecond_the_first_arrived_one_was_is_cut_off_at_the_start() -> None:
    # A CI soak run: seq 4 and an out-of-order seq 1 sent in one millisecond before the resource
    # was observed; observe delivered one state: the other is cut off, not lost.
    start = FaultWindow("start", "start", 0, 0, 0)
    lost = entry("coap", "c1", 2_088, 17.94, 4, sent_ms=2_093)
    delivered = entry("coap", "c1", 1_085, 18.03, 1, sent_ms=2_093)
    later = entry("coap", "c1", 3_086, 17.87, 7, sent_ms=3_087)
    sent = sent_of(lost, delivered, later)
    cut = CutOff.of([], sent, Counter([key(delivered), key(later)]))
    assert cut.excused(lost) == start


def test_hazelcast_windows_gone_with_a_killed_member_are_counted_apart_and_only_those() -> None:
    kill = FaultWindow("hazelcast", "kill", start_ms=20_000, end_ms=25_000, whole_ms=30_000)
    wanted = {("d", 0): stats([1.0]), ("d", 10_000): stats([2.0]), ("d", 30_000): stats([3.0])}
    held = {("d", 10_000): [{}]}
    result = Result()
    assert without_lost_with_member("hazelcast", held, wanted, [kill], result) == {
        ("d", 10_000): wanted[("d", 10_000)],  # written again after the restart: still checked
        ("d", 30_000): wanted[("d", 30_000)],  # after the restart: must be there
    }
    assert result.figures["hazelcast_windows_lost_with_killed_member"] == 1
    assert without_lost_with_member("scylla", {}, wanted, [kill], result) == wanted  # a database keeps its rows
    assert without_lost_with_member("hazelcast", {}, wanted, [], result) == wanted


@pytest.mark.parametrize("store", ["elasticsearch", "hazelcast"])
def test_a_store_must_hold_every_window_once_and_equal(store: str) -> None:
    wanted = {("d", 0): stats([1.0, 3.0]), ("d", 10_000): stats([5.0])}
    good = {**wanted[("d", 0)], "device_id": "d", "window_start": "1970-01-01T00:00:00+00:00"}
    result = Result()
    compare(store, {("d", 0): [good, good]}, wanted, result)
    problems = "\n".join(result.problems)
    assert f"{store}: 1 windows missing" in problems
    assert ("windows held more than once" in problems) == (store != "hazelcast")  # the ringbuffer appends
    wrong = Result()
    compare(store, {("d", 0): [{**good, "stddev": 0.5}], ("d", 10_000): [{"count": 1, "min": 5.0, "max": 5.0,
            "mean": 5.0, "stddev": 0.0}], ("e", 0): [good]}, wanted, wrong)  # fmt: skip
    assert wrong.problems == [
        f"{store} ('d', 0): stddev 0.5 != 1.0",
        f"{store}: 1 windows nobody sent readings for, e.g. [('e', 0)]",
    ]
    right = Result()
    compare(store, {("d", 0): [good], ("d", 10_000): [{**wanted[("d", 10_000)]}]}, wanted, right)
    assert right.passed


def test_times_come_back_from_each_store_in_its_own_form() -> None:
    from datetime import UTC, datetime

    moment = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    ms = 1_795_600_800_000
    assert to_ms(moment) == to_ms(moment.replace(tzinfo=None)) == to_ms("2026-11-25T10:00:00Z") == to_ms(ms) == ms
    assert to_ms("2026-11-25T10:00:00.000+00:00") == ms


def test_random_ledgers_recompute_to_the_same_windows_in_any_order() -> None:
    rng = random.Random(3)
    entries = [entry("mqtt", f"d{rng.randrange(3)}", rng.randrange(50_000), float(rng.randrange(100)), i, i)
               for i in range(200)]  # fmt: skip
    arrived = Counter(key(e) for e in entries)
    forward = expected_windows(spec(), sent_of(*entries), arrived, Counter(), CutOff([]))
    backward = expected_windows(spec(), sent_of(*reversed(entries)), arrived, Counter(), CutOff([]))
    assert forward.keys() == backward.keys()
    assert sum(int(w["count"]) for w in forward.values()) == 200


def test_a_restarted_child_keeps_its_place_in_the_stop_order(tmp_path: Path) -> None:
    from run_pipeline import Pipeline

    pipeline = Pipeline(tmp_path)
    for name in ("first", "second"):
        pipeline.start(name, ["sleep", "30"])
    pipeline.stop("first")
    pipeline.restart("first")
    try:
        assert [name for name, _ in pipeline.children] == ["first", "second"]
    finally:
        pipeline.stop_rest()
