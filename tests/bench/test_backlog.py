"""The backlog benchmark's pure parts (issue #36): its defaults, the windows a backlog closes,
when a stage has caught up and the figures the report stands on. No server is needed."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fluxgate_scylla_persister.driver import CONNECTION_CLASS

# Appended, not first: bench/ has an elasticsearch.py, which must never shadow the library.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import _readings
import backlog
from _readings import Readings, produce
from backlog import (
    STAGES,
    Result,
    Sample,
    backlog_size,
    batch_sizes,
    caught_up,
    chart_limit_mib,
    expected_windows,
    leg_of,
    parse_args,
    stage_env,
    start_figures,
    sum_offsets,
    summarise,
    topic_partitions,
    with_live_traffic_s,
)
from run_pipeline import Names


def test_the_defaults_are_ten_minutes_at_the_fleet_rate_from_devices_reporting_once_a_minute() -> None:
    args = parse_args([])
    assert args.stages.split(",") == [  # the aggregator first
        "aggregator", "es-persister", "scylla-persister", "hazelcast-persister", "device-status"
    ]  # fmt: skip
    assert (args.seconds, args.rate, args.devices, args.partitions) == (600.0, 1000.0, 60_000, 3)
    assert backlog_size(args) == 600_000


def test_the_devices_follow_the_rate_unless_given() -> None:
    assert parse_args(["--rate", "50", "--seconds", "60"]).devices == 3000
    args = parse_args(["--rate", "50", "--seconds", "60", "--devices", "10"])
    assert (args.devices, backlog_size(args)) == (10, 3000)


def test_an_unknown_stage_is_refused() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--stages", "aggregator,scylla"])


def test_a_backlog_closes_the_windows_ending_at_or_behind_the_watermark() -> None:
    # The readings start 20 s into an epoch minute (1_700_000_000_000 ms is 22:13:20 UTC):
    # at +0 s (that minute), +40 s and +80 s (the next, which ends at +100 s). The watermark is
    # the last event time (ingest minus the 50 ms offset) minus 30 s: +50 s, so one closes.
    assert expected_windows(Readings(3, 1, 120_000)) == 1
    assert expected_windows(Readings(0, 1, 60_000)) == 0


def test_the_windows_expected_are_those_the_aggregator_wrote() -> None:
    # A real run (120 s at 1000/s, 60,000 devices) wrote 40,000 windows: the devices whose first
    # reading fell in the minute that ends 40 s in; the rest are open behind the watermark.
    assert expected_windows(Readings(120_000, 60_000, 120_000)) == 40_000


def look(t: float, lag: int, done: int, rss: float = 100.0, load: float = 2.0, ready: bool = False) -> Sample:
    return Sample(t, lag, done, rss, load, ready)


def test_caught_up_needs_no_lag_and_everything_done() -> None:
    assert caught_up(look(1, 0, 10), 10)
    assert not caught_up(look(1, 0, 9), 10)  # read, but a window not written yet
    assert not caught_up(look(1, 1, 10), 10)


def test_the_summary_times_start_up_and_catch_up_and_the_rate_between() -> None:
    samples = [
        look(0.0, 1000, 0, rss=50, load=3.0),
        look(20.0, 1000, 0, rss=400, ready=True),  # start-up done
        look(30.0, 500, 0, rss=900, load=5.5),
        look(40.0, 0, 90, rss=800),  # read all, a window short
        look(45.0, 0, 100, rss=700),
    ]
    summary = summarise(samples, records=1000, expected=100)
    assert (summary.started_s, summary.caught_up_s) == (20.0, 45.0)
    assert summary.per_second == pytest.approx(1000 / 25)
    assert summary.peak_polled_mib == 900
    assert summary.load == (2.0, 5.5)


def test_a_group_that_moved_counts_as_started_before_readyz_answers() -> None:
    summary = summarise([look(0, 10, 0), look(5, 4, 0), look(10, 0, 10)], records=10, expected=10)
    assert (summary.started_s, summary.caught_up_s, summary.per_second) == (5, 10, 2.0)


def test_a_stage_that_never_caught_up_has_no_catch_up_time_and_no_rate() -> None:
    summary = summarise([look(0, 10, 0, ready=True), look(5, 0, 3)], records=10, expected=10)
    assert summary.caught_up_s is None
    assert summary.per_second == 0.0
    assert summarise([], 10, 10).peak_polled_mib == 0.0


def test_with_the_fleet_still_sending_a_backlog_shrinks_by_the_difference() -> None:
    assert with_live_traffic_s(600_000, 3000.0, 1000.0) == 300.0
    assert with_live_traffic_s(600_000, 1000.0, 1000.0) is None  # never catches up


def test_batch_sizes_come_from_the_offsets_each_batch_ended_at() -> None:
    assert batch_sizes([200_000, 400_000, 600_000]) == [200_000] * 3
    assert batch_sizes([]) == []


def test_a_spark_offset_log_entry_is_summed_over_partitions(tmp_path: Path) -> None:
    entry = tmp_path / "2"
    entry.write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"backlog-x.readings":{"2":13,"1":10,"0":12}}')
    assert sum_offsets(entry) == 35


def test_the_aggregator_log_gives_its_start_and_first_batch() -> None:
    log = (
        'event=aggregator.started input=x window="1 minute" session_s=33.343 service=aggregator\n'
        "event=query.first_batch name=aggregates batch=0 rows=60000 triggerExecution_s=44.712 addBatch_s=40.7\n"
    )
    assert start_figures(log) == {"session_s": 33.343, "first_batch_rows": 60000, "first_batch_s": 44.712}
    assert start_figures("") == {}


def test_the_charts_limits() -> None:
    assert chart_limit_mib("aggregator") == 3072
    assert chart_limit_mib("es-persister") == 384
    assert chart_limit_mib("scylla-persister") == 384
    assert chart_limit_mib("hazelcast-persister") == 320
    assert chart_limit_mib("device-status") == 320


def test_a_stage_gets_its_own_names_and_port_and_none_of_this_process_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLUXGATE_AGG_SPARK__MAX_OFFSETS_PER_TRIGGER", "5")  # would change what is measured
    stack = SimpleNamespace(bootstrap="127.0.0.1:9092", registry_url="http://r", elasticsearch_url="http://es")
    names = Names("backlog-x-")
    env = stage_env(STAGES["aggregator"], names, stack, 40000, tmp_path, parse_args([]))
    assert "FLUXGATE_AGG_SPARK__MAX_OFFSETS_PER_TRIGGER" not in env  # the service's default cap
    assert env["FLUXGATE_AGG_HTTP__PORT"] == "40000"
    assert env["FLUXGATE_AGG_INPUT_TOPIC"] == "backlog-x-sensors.readings"
    assert env["FLUXGATE_AGG_PROGRESS_GROUP"] == "backlog-x-fluxgate-aggregator"
    assert env["FLUXGATE_AGG_CHECKPOINT_DIR"] == str(tmp_path / "checkpoints")
    assert env["FLUXGATE_AGG_SPARK__DRIVER_MEMORY"] == "1536m"  # the heap its chart's 3 GiB pod gets
    status = stage_env(STAGES["device-status"], names, stack, 40001, tmp_path, parse_args([]))
    assert status["FLUXGATE_STATUS_STATUS__SILENCE_THRESHOLD_S"] == "120"  # twice a device's period


def test_a_setting_asked_for_reaches_only_the_stage_it_is_prefixed_for(tmp_path: Path) -> None:
    args = parse_args(["--set", 'FLUXGATE_ES_KAFKA__EXTRA={"a":"b=c"}', "--set", "FLUXGATE_AGG_SPARK__MASTER=local[1]"])
    stack = SimpleNamespace(bootstrap="b", registry_url="r", elasticsearch_url="e")
    env = stage_env(STAGES["es-persister"], Names("x-"), stack, 40000, tmp_path, args)
    assert env["FLUXGATE_ES_KAFKA__EXTRA"] == '{"a":"b=c"}'  # split at the first "=" only
    assert "FLUXGATE_AGG_SPARK__MASTER" not in env


def test_the_services_default_ports_are_never_used(monkeypatch: pytest.MonkeyPatch) -> None:
    offered = iter([9103, 9107, 41000])
    monkeypatch.setattr(backlog, "free_port", lambda: next(offered))
    assert backlog.service_port() == 41000


def test_only_the_topic_the_stage_reads_takes_the_partitions_asked_for() -> None:
    names = Names("backlog-x-")
    hazelcast = topic_partitions(STAGES["hazelcast-persister"], names, 12)
    assert hazelcast["backlog-x-temperatures.aggregated"] == 12
    assert {count for topic, count in hazelcast.items() if topic != "backlog-x-temperatures.aggregated"} == {3}
    assert topic_partitions(STAGES["aggregator"], names, 6)["backlog-x-sensors.readings"] == 6
    assert set(topic_partitions(STAGES["device-status"], names, 3).values()) == {3}


def test_each_persister_is_pointed_at_its_store_and_its_own_target(tmp_path: Path) -> None:
    stores = {"cassandra_host": "127.0.0.1", "cassandra_port": 9042, "hazelcast_address": "127.0.0.1:5701"}
    stack = SimpleNamespace(bootstrap="b", registry_url="r", hazelcast_cluster="fluxgate", **stores)
    names, args = Names("backlog-x-"), parse_args([])
    scylla = stage_env(STAGES["scylla-persister"], names, stack, 40000, tmp_path, args)
    assert scylla["FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS"] == '["127.0.0.1"]'
    assert scylla["FLUXGATE_SCYLLA_SCYLLA__PORT"] == "9042"
    assert scylla["FLUXGATE_SCYLLA_SINK__KCQL"].startswith("UPSERT INTO fluxgate.backlog_x_temperature_aggregates ")
    assert scylla["FLUXGATE_SCYLLA_SINK__GROUP_ID"] == "backlog-x-fluxgate-scylla-persister"
    hazelcast = stage_env(STAGES["hazelcast-persister"], names, stack, 40001, tmp_path, args)
    assert hazelcast["FLUXGATE_HZ_HAZELCAST__MEMBERS"] == '["127.0.0.1:5701"]'
    assert hazelcast["FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME"] == "fluxgate"
    assert hazelcast["FLUXGATE_HZ_SINK__KCQL"].startswith("INSERT INTO backlog_x_temperature_aggregates ")
    assert hazelcast["FLUXGATE_HZ_HTTP__PORT"] == "40001"


class FullOnce:
    """A producer whose queue is full at the first record: the caller must poll and try again."""

    def __init__(self, config: dict[str, object]) -> None:
        self.config, self.sent, self.polls, self.full = config, list[tuple[str, bytes, bytes]](), 0, True

    def produce(self, topic: str, value: bytes, key: bytes) -> None:
        if self.full:
            self.full = False
            raise BufferError
        self.sent.append((topic, key, value))

    def poll(self, timeout: float) -> None:
        self.polls += 1

    def flush(self, timeout: float) -> int:
        return 0


def test_the_producer_keys_every_record_and_waits_out_a_full_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[FullOnce] = []

    def producer(config: dict[str, object]) -> FullOnce:
        made.append(FullOnce(config))
        return made[-1]

    monkeypatch.setattr(_readings, "Producer", producer)
    seconds = produce("b:9092", "t", ["a", "b"], lambda r: (r.encode(), r.upper().encode()), "x", {"batch.size": 7})
    (producer_used,) = made
    assert producer_used.sent == [("t", b"a", b"A"), ("t", b"b", b"B")] and producer_used.polls == 1
    assert producer_used.config["compression.type"] == "lz4" and producer_used.config["batch.size"] == 7
    assert seconds >= 0


def test_each_stage_expects_the_records_but_the_aggregator_the_windows_they_close() -> None:
    args = parse_args(["--rate", "1000", "--seconds", "120", "--devices", "60000"])
    assert STAGES["aggregator"].expected(args) == 40_000
    assert {STAGES[name].expected(args) for name in STAGES if name != "aggregator"} == {120_000}


def test_each_stage_counts_what_it_did_in_its_own_place(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = {"fluxgate_sink_records_written_total": 7.0, "fluxgate_status_readings_total": 9.0}
    monkeypatch.setattr(backlog, "metric", lambda port, name: metrics[name])
    offsets = SimpleNamespace(ends=lambda topic: {0: 2, 1: 3} if topic == "x-temperatures.aggregated" else {})
    done = {name: stage.done(Names("x-"), 40000, offsets) for name, stage in STAGES.items()}  # type: ignore[arg-type]
    assert done == {"aggregator": 5, "es-persister": 7, "scylla-persister": 7, "hazelcast-persister": 7,
                    "device-status": 9}  # fmt: skip


def test_the_report_says_in_a_word_whether_peak_memory_was_within_the_limit() -> None:
    summary = summarise([look(0, 0, 10, rss=300)], records=10, expected=10)
    within = Result("es-persister", 10, 10, 10, summary, 1.0, 250.0, 384.0)
    above = Result("es-persister", 10, 10, 10, summary, 1.0, 400.0, 384.0)
    assert leg_of(within, parse_args([])).extra["within limit"] == "yes"
    assert leg_of(above, parse_args([])).extra["within limit"] == "no"


class Recorder:
    """A store's client, or what one of its calls returns: records in ``calls`` each call made of
    it or of anything it returns, with the arguments."""

    def __init__(self, calls: list[tuple[Any, ...]], name: str) -> None:
        self.calls, self.name = calls, name

    def __call__(self, *args: Any, **kwargs: Any) -> Recorder:
        self.calls.append((self.name, *args, *sorted(kwargs.items())))
        return self

    def __getattr__(self, name: str) -> Recorder:
        return Recorder(self.calls, name)


def test_each_persister_drops_its_own_target_from_its_store_and_the_other_stages_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(backlog.httpx, "delete", Recorder(calls, "delete"))
    monkeypatch.setattr("fluxgate_scylla_persister.driver.Cluster", Recorder(calls, "Cluster"))
    monkeypatch.setattr("hazelcast.client.HazelcastClient", Recorder(calls, "HazelcastClient"))
    stack = SimpleNamespace(elasticsearch_url="http://es", cassandra_host="127.0.0.1", cassandra_port=9042,
                            hazelcast_address="127.0.0.1:5701", hazelcast_cluster="fluxgate")  # fmt: skip
    dropped = {}
    for name, stage in STAGES.items():
        stage.drop(stack, Names("backlog-x-"))
        dropped[name], calls[:] = calls[:], []
    target = "backlog_x_temperature_aggregates"
    assert dropped == {
        "aggregator": [],
        "es-persister": [
            ("delete", f"http://es/{target}-*", ("params", {"expand_wildcards": "all"}), ("timeout", 60)),
            ("delete", f"http://es/_index_template/{target}", ("timeout", 60)),
        ],
        "scylla-persister": [
            ("Cluster", ["127.0.0.1"], ("connection_class", CONNECTION_CLASS), ("port", 9042)),
            ("connect",),
            ("execute", f"DROP TABLE IF EXISTS fluxgate.{target}", ("timeout", 120)),
            ("shutdown",),
        ],
        "hazelcast-persister": [
            ("HazelcastClient", ("cluster_members", ["127.0.0.1:5701"]), ("cluster_name", "fluxgate")),
            ("get_ringbuffer", target),
            ("blocking",),
            ("destroy",),
            ("shutdown",),
        ],
        "device-status": [],
    }


def test_each_stage_adds_its_own_details_to_its_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = {"fluxgate_aggregator_late_rows": 2.0, "fluxgate_aggregator_dead_letters": 1.0,
               "fluxgate_sink_write_seconds_count": 4.0, "fluxgate_sink_write_seconds_sum": 0.2}  # fmt: skip
    monkeypatch.setattr(backlog, "metric", lambda port, name: metrics[name])
    monkeypatch.setattr(backlog, "batch_split", lambda port: {})
    monkeypatch.setattr(backlog, "group_pids", lambda leader: [])
    (tmp_path / "checkpoints" / "aggregates" / "offsets").mkdir(parents=True)
    (tmp_path / "checkpoints" / "aggregates" / "offsets" / "0").write_text('v1\n{}\n{"t":{"0":20,"1":15}}')
    (tmp_path / "aggregator.log").write_text("event=aggregator.started input=x session_s=3.5\n")
    process = SimpleNamespace(pid=4242)
    details = {name: stage.details(tmp_path, 40000, process) for name, stage in STAGES.items()}  # type: ignore[arg-type]
    persister = {"writes": 4.0, "mean_write_ms": 50.0}
    assert details == {
        "aggregator": {"batches": 1, "batch_sizes": [35], "largest_batch": 35, "late_rows": 2.0, "dead_letters": 1.0,
                       "seconds_per_batch": {}, "jvm_heap": [], "session_s": 3.5},
        "es-persister": persister,
        "scylla-persister": persister,
        "hazelcast-persister": persister,
        "device-status": {},
    }  # fmt: skip


def test_a_stage_run_takes_its_details_and_what_to_drop_from_the_stage_whatever_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process = SimpleNamespace(pid=4242)
    for attr, fake in {
        "RESULTS": tmp_path, "create_topics": lambda *a: None, "produce_backlog": lambda *a: {"records": 10},
        "service_port": lambda: 40000, "stage_env": lambda *a: {}, "start": lambda *a: process,
        "watch": lambda *a: [look(1.0, 0, 10)], "group_memory_mib": lambda pid, key: 100.0,
        "group_cpu_seconds": lambda pid: 1.0, "stop_child": lambda child: 0, "chart_limit_mib": lambda name: 320.0,
    }.items():  # fmt: skip
        monkeypatch.setattr(backlog, attr, fake)
    calls: list[tuple[Any, ...]] = []

    def details(folder: Path, port: int, child: Any) -> dict[str, Any]:
        calls.append(("details", folder.parent, port, child.pid))
        return {"own": 1}

    def drop(stack: Any, names: Names) -> None:
        calls.append(("drop", stack.bootstrap, names.prefix.startswith("backlog-renamed")))

    # A name no stage has: what the run does must come from the stage's fields, not its name.
    stage = replace(STAGES["device-status"], name="renamed", details=details, drop=drop)
    args, stack = parse_args(["--rate", "1", "--seconds", "10"]), SimpleNamespace(bootstrap="b")
    result = backlog.run_stage(stage, stack, args)
    assert calls == [("details", tmp_path, 40000, 4242), ("drop", "b", True)]
    assert (result.stage, result.details["own"], result.details["exit_code"]) == ("renamed", 1, 0)

    def interrupted(*args: Any) -> list[Sample]:
        raise RuntimeError

    calls.clear()
    monkeypatch.setattr(backlog, "watch", interrupted)
    with pytest.raises(RuntimeError):
        backlog.run_stage(stage, stack, args)
    assert calls == [("drop", "b", True)]  # its store dropped all the same
