"""Backlogs (issue #36): a stage stopped for ``--seconds`` at the fleet's rate, then started
into what piled up. Does it catch up, how fast, and within its chart's memory limit?

For each stage in ``--stages`` (the aggregator first, then the three persisters, then
device-status), with names of its own (prefixed topics, groups and store target, as
``bench/pipeline.py``'s run), it:

* produces the backlog to a fresh topic of ``--partitions`` partitions (3: the charts'
  ``kafka.partitions``) from a spawned child (the producer's memory is
  nobody's): ``--rate`` x ``--seconds`` records from ``--devices`` devices (by default
  ``--rate`` x 60, each reporting about once a minute: Hive's shape). The aggregator and
  device-status read SensorReadings in the gateways' wire format (``_readings``: the i-th
  reading of device ``i % devices`` at ``i / rate`` seconds, ingest time 50 ms later); the
  persisters TemperatureAggregates (``_persisters.aggregates``: a window minute of every
  device, then the next);
* starts the stage as its console script from the venv (``FLUXGATE_*`` settings, a free
  HTTP port), configured as its chart is where memory depends on it: the chart's defaults
  (``config: {}``), so the aggregator runs ``local[*]`` in-process with the heap its pod's
  memory limit leaves (set here, where no cgroup limits the process) and its default
  micro-batch cap (``spark.max_offsets_per_trigger``, 200,000);
* polls every ``--poll`` s until it has caught up: its consumer group's lag is 0 (for the
  aggregator its progress group, committed after each finished batch) and what it must have
  done is done (the aggregator: every window the backlog closes on its output topic; the
  persisters: every aggregate confirmed by their store; device-status: every reading
  applied to its table). Meanwhile it samples the process group's resident memory
  (VmRSS, summed) and the load average; at the end it reads the group's VmHWM.

Reported per stage: catch-up time from the process's start, start-up (until its group first
moved), records/s between those, CPU µs per record (the whole process group), peak memory
against the chart's ``resources.limits.memory`` (nothing enforces the limit here: it is
compared, not applied), and for the aggregator its batches (sizes from the checkpoint's
offset log), late readings and dead letters. Results: ``bench-results/backlog.json``,
``.md`` and ``.png``; each stage's log (and the aggregator's checkpoint) in
``bench-results/backlog-<stage><time>/``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml
from _common import RESULTS, LegResult, micros_per, print_table, stack_up, write_report
from _readings import Readings, produce, produce_in_child
from fluxgate_testing import free_port

# _persisters.py and pipeline.py each fail mypy's strict mode on a line of their own (they
# return what untyped modules give), so they are loaded at run time and their helpers typed
# here. Loading pipeline also puts tools/ first on the path (run_pipeline, prefixed_run) and
# this folder off it.
_PERSISTERS = importlib.import_module("_persisters")
aggregates: Callable[[int, int], list[dict[str, Any]]] = _PERSISTERS.aggregates
metric: Callable[[int, str], float] = _PERSISTERS.metric
_PIPELINE = importlib.import_module("pipeline")
group_cpu_seconds: Callable[[int], float] = _PIPELINE.group_cpu_seconds
group_memory_mib: Callable[[int, str], float] = _PIPELINE.group_memory_mib
group_pids: Callable[[int], list[int]] = _PIPELINE.group_pids
batch_split: Callable[[int], dict[str, float]] = _PIPELINE.batch_split
per_batch: Callable[[dict[str, float], dict[str, float]], dict[str, float]] = _PIPELINE.per_batch
# Back at the end, where it shadows no client package: a spawned producer child runs this
# file again with this path, and must find _common and _readings.
sys.path.append(str(Path(__file__).resolve().parent))

from charts import CHARTS, memory_bytes  # noqa: E402 - on the path pipeline set
from prefixed_run import TOPICS, run_names  # noqa: E402 - on the path pipeline set
from run_pipeline import Names, Offsets, prefixed, stop_child  # noqa: E402 - on the path pipeline set

from fluxgate_aggregator.driver_heap import driver_heap  # noqa: E402
from fluxgate_stack.topics import create_topics  # noqa: E402

BIN = Path(sys.executable).parent
RESERVED_PORTS = range(9101, 9109)  # the services' defaults: other runs use them
WINDOW_MS, WATERMARK_MS = 60_000, 30_000  # the aggregator's defaults (the chart sets none)
FLEET_RATE = 1000.0  # bench/fleet.py's --rate


# What only that stage needs set (its checkpoints, its store, its table's folder), given the
# stack, the stage's results folder and the arguments.
StageSettings = Callable[[Any, Path, argparse.Namespace], dict[str, str]]
# What the stage has done so far, given its names, its HTTP port and the run's offsets.
Done = Callable[[Names, int, Offsets], int]
# What its results add beyond every stage's figures, given its results folder, its HTTP port and
# its process (still running).
Details = Callable[[Path, int, subprocess.Popen[bytes]], dict[str, Any]]
# Drops what it wrote to its store (each run writes to a target of its own), given the stack and
# its names.
Drop = Callable[[Any, Names], None]


@dataclass(frozen=True)
class Stage:
    """A stage under test (``STAGES``): its console script, settings prefix, chart and what it
    reads, and what sets the stages apart: the settings only it needs, the work the backlog asks
    of it (the records, or the windows they close), how much of that it has done, what its results
    add and what of its store to drop after it."""

    name: str
    argv: tuple[str, ...]
    prefix: str
    reads: Literal["readings", "aggregates"]
    settings: StageSettings
    expected: Callable[[argparse.Namespace], int]
    done: Done
    details: Details
    drop: Drop


@dataclass(frozen=True)
class Sample:
    """One look at a stage catching up, ``t`` seconds after its process started."""

    t: float
    lag: int  # records of its input its group has not committed
    done: int  # windows written, aggregates confirmed or readings applied so far
    rss_mib: float  # the process group's resident memory now, summed
    load: float  # 1-minute load average
    ready: bool = False  # its /readyz answered 200


@dataclass(frozen=True)
class Summary:
    """What a stage's samples say (see :func:`summarise`)."""

    started_s: float | None  # first look at which it was ready or its group had moved: start-up done
    caught_up_s: float | None  # first look at which lag was 0 and everything was done
    per_second: float  # records over the time between those two
    peak_polled_mib: float
    load: tuple[float, float]  # lowest and highest 1-minute load average seen


@dataclass
class Result:
    stage: str
    records: int
    expected: int
    done: int
    summary: Summary
    cpu_s: float
    peak_mib: float  # VmHWM of every process of the group, summed
    limit_mib: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def highest_mib(self) -> float:
        """The higher of the VmHWM sum and the highest VmRSS sum polled: the VmHWM of a process
        that ended is lost; a polled sum counts the pages a fork shares with its parent twice."""
        return max(self.peak_mib, self.summary.peak_polled_mib)

    @property
    def within_limit(self) -> bool:
        return self.highest_mib <= self.limit_mib


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", default=",".join(STAGES), help="stages to run, in order")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long the stage was stopped")
    parser.add_argument("--rate", type=float, default=FLEET_RATE, help="records/s arriving while it was stopped")
    parser.add_argument("--devices", type=int, default=None, help="devices (default: --rate × 60, once a minute)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic the stage reads")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between looks")
    parser.add_argument("--timeout", type=float, default=1800.0, help="give a stage up after this many seconds")
    parser.add_argument("--settle", type=float, default=60.0, help="stop this long after lag 0 if work is missing")
    parser.add_argument("--set", action="append", default=[], metavar="FLUXGATE_X_NAME=VALUE",
                        help="a setting of the stage it is prefixed for, beyond the chart's (repeatable)")  # fmt: skip
    args = parser.parse_args(argv)
    args.devices = args.devices or round(args.rate * 60)
    args.settings = dict(pair.partition("=")[::2] for pair in args.set)
    unknown = sorted(set(args.stages.split(",")) - set(STAGES))
    if unknown:
        parser.error(f"unknown stages {unknown}; known: {', '.join(STAGES)}")
    return args


def backlog_size(args: argparse.Namespace) -> int:
    rate, seconds = float(args.rate), float(args.seconds)
    return round(rate * seconds)


def readings_of(args: argparse.Namespace) -> Readings:
    """The backlog's readings: reading ``i`` at ``i / rate`` s from a fixed minute."""
    return Readings(backlog_size(args), args.devices, round(args.seconds * 1000))


def expected_windows(readings: Readings, window_ms: int = WINDOW_MS, watermark_ms: int = WATERMARK_MS) -> int:
    """Windows the aggregator writes once it has read the whole backlog: every device's that
    end at or behind its watermark. Every reading is ingested 50 ms after its event time, so
    each device's clock offset is 50 ms and its watermark ``C - 50 ms - watermark``, where the
    gateways' clock ``C`` is the last reading's ingest time (decision 0011)."""
    if readings.count == 0:
        return 0
    watermark = readings.event_ms(readings.count - 1) - watermark_ms
    windows = set()
    for i in range(readings.count):
        start = readings.event_ms(i) // window_ms * window_ms  # windows align to the epoch
        if start + window_ms <= watermark:
            windows.add((i % readings.devices, start))
    return len(windows)


def caught_up(sample: Sample, expected: int) -> bool:
    return sample.lag == 0 and sample.done >= expected


def summarise(samples: Sequence[Sample], records: int, expected: int) -> Summary:
    """Start-up ends at the first look at which the stage was ready or its group had moved;
    catch-up at the first look caught up; the rate is the records over the time between."""
    started = next((s.t for s in samples if s.ready or s.lag < records), None)
    done = next((s.t for s in samples if caught_up(s, expected)), None)
    span = done - started if done is not None and started is not None else 0.0
    loads = [s.load for s in samples] or [0.0]
    return Summary(
        started_s=started,
        caught_up_s=done,
        per_second=round(records / span, 1) if span > 0 else 0.0,
        peak_polled_mib=max((s.rss_mib for s in samples), default=0.0),
        load=(min(loads), max(loads)),
    )


def with_live_traffic_s(records: int, per_second: float, rate: float) -> float | None:
    """Catch-up time had the fleet kept sending at ``rate`` meanwhile (the backlog shrinks by
    the difference); ``None`` when the stage is no faster than the fleet: it never would."""
    return round(records / (per_second - rate), 1) if per_second > rate else None


def batch_sizes(ends: Sequence[int]) -> list[int]:
    """Records per micro-batch from the input offsets each batch ended at (summed over partitions)."""
    return [end - before for before, end in zip([0, *ends], ends, strict=False)]


def chart_limit_mib(stage: str) -> float:
    return chart_limit(stage) / 2**20


def chart_limit(stage: str) -> int:
    """The stage's chart's ``resources.limits.memory`` in bytes."""
    values = yaml.safe_load((CHARTS / stage / "values.yaml").read_text())
    return memory_bytes(str(values["resources"]["limits"]["memory"]))


def service_port() -> int:
    while (port := int(free_port())) in RESERVED_PORTS:
        pass
    return port


def stage_env(
    stage: Stage, names: Names, stack: Any, port: int, folder: Path, args: argparse.Namespace
) -> dict[str, str]:
    """The stage's environment: this process's without the stage's prefix, then the stack,
    its names' topics, groups and targets, a free port, and what only that stage needs."""
    own = {
        "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
        "REGISTRY__URL": stack.registry_url,
        "HTTP__HOST": "127.0.0.1",
        "HTTP__PORT": str(port),
        "LOG__JSON_OUTPUT": "false",
        **names.env(stage.name),
    }
    own |= stage.settings(stack, folder, args)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(stage.prefix)}
    settings: dict[str, str] = prefixed(stage.prefix, own)
    asked = {k: v for k, v in args.settings.items() if k.startswith(stage.prefix)}
    return inherited | settings | asked


def aggregator_settings(stack: Any, folder: Path, args: argparse.Namespace) -> dict[str, str]:
    # A pod's heap follows its memory limit; nothing limits this process, so it is given the
    # heap its chart's pod would have.
    heap = driver_heap(None, chart_limit("aggregator")).memory
    return {"CHECKPOINT_DIR": str(folder / "checkpoints")} | ({"SPARK__DRIVER_MEMORY": heap} if heap else {})


def es_settings(stack: Any, folder: Path, args: argparse.Namespace) -> dict[str, str]:
    return {"ELASTICSEARCH__HOSTS": json.dumps([stack.elasticsearch_url])}


def scylla_settings(stack: Any, folder: Path, args: argparse.Namespace) -> dict[str, str]:
    return {"SCYLLA__CONTACT_POINTS": json.dumps([stack.cassandra_host]), "SCYLLA__PORT": str(stack.cassandra_port)}


def hazelcast_settings(stack: Any, folder: Path, args: argparse.Namespace) -> dict[str, str]:
    return {
        "HAZELCAST__MEMBERS": json.dumps([stack.hazelcast_address]),
        "HAZELCAST__CLUSTER_NAME": stack.hazelcast_cluster,
    }


def status_settings(stack: Any, folder: Path, args: argparse.Namespace) -> dict[str, str]:
    # A device silent for its period between reports would flap OFFLINE and back with the
    # default 60 s threshold; twice the period, as bench/fleet.py sets it.
    return {"STATUS__DATA_DIR": str(folder / "device-status"),
            "STATUS__SILENCE_THRESHOLD_S": f"{2 * args.devices / args.rate:g}"}  # fmt: skip


def windows_closed(args: argparse.Namespace) -> int:
    return expected_windows(readings_of(args))


def windows_written(names: Names, port: int, offsets: Offsets) -> int:
    return sum(offsets.ends(names.aggregated).values())


def aggregates_confirmed(names: Names, port: int, offsets: Offsets) -> int:
    return int(metric(port, "fluxgate_sink_records_written_total"))


def readings_applied(names: Names, port: int, offsets: Offsets) -> int:
    return int(metric(port, "fluxgate_status_readings_total"))


def aggregator_details(folder: Path, port: int, process: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Its batches (sizes from the checkpoint's offset log), Spark's and our split of them,
    late readings, dead letters, and the heap its JVM was given."""
    ends = [sum_offsets(path) for path in sorted(offset_logs(folder), key=lambda p: int(p.name))]
    sizes = batch_sizes(ends)
    return {
        "batches": len(sizes),
        "batch_sizes": sizes,
        "largest_batch": max(sizes, default=0),
        "late_rows": metric(port, "fluxgate_aggregator_late_rows"),
        "dead_letters": metric(port, "fluxgate_aggregator_dead_letters"),
        "seconds_per_batch": per_batch({}, batch_split(port)),
        "jvm_heap": jvm_options(process.pid),
        **start_figures((folder / "aggregator.log").read_text(errors="replace")),
    }


def start_figures(log: str) -> dict[str, float]:
    """From the aggregator's log: its JVM and Spark session's start (``session_s``), and its
    first batch's rows and seconds (``query.first_batch``)."""
    found = {}
    for event, key, name in (("aggregator.started", "session_s", "session_s"),
                             ("query.first_batch", "rows", "first_batch_rows"),
                             ("query.first_batch", "triggerExecution_s", "first_batch_s")):  # fmt: skip
        match = re.search(rf"event={re.escape(event)} .*?\b{key}=([0-9.]+)", log)
        if match:
            found[name] = float(match.group(1))
    return found


def offset_logs(folder: Path) -> list[Path]:
    return [p for p in (folder / "checkpoints").rglob("offsets/*") if p.name.isdigit()]


def sum_offsets(path: Path) -> int:
    """A Spark offset log entry (``v1``, metadata, then one line per source): the Kafka
    source's end offsets, summed over partitions."""
    source = json.loads(path.read_text().splitlines()[-1])
    return sum(int(offset) for partitions in source.values() for offset in partitions.values())


def jvm_options(leader: int) -> list[str]:
    """The memory options of the JVMs in the group (``-Xmx1536m``: what the chart's 3 GiB leaves)."""
    found = []
    for pid in group_pids(leader):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            if argv and argv[0].endswith("java"):
                found += [arg for arg in argv if arg.startswith(("-Xmx", "-Xms", "-XX:MaxRAM"))]
    return found


def persister_details(folder: Path, port: int, process: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Its store's writes: how many, and their mean time."""
    writes = metric(port, "fluxgate_sink_write_seconds_count")
    return {"writes": writes, "mean_write_ms": round(1000 * metric(port, "fluxgate_sink_write_seconds_sum")
                                                     / max(writes, 1), 1)}  # fmt: skip


def no_details(folder: Path, port: int, process: subprocess.Popen[bytes]) -> dict[str, Any]:
    return {}


def drop_nothing(stack: Any, names: Names) -> None:
    """The aggregator and device-status write to no store: nothing to drop."""


def drop_indices(stack: Any, names: Names) -> None:
    """The es-persister's daily indices and template (as bench/elasticsearch.py drops its own)."""
    es_url, target = stack.elasticsearch_url, names.store_target
    with contextlib.suppress(httpx.HTTPError):
        httpx.delete(f"{es_url}/{target}-*", params={"expand_wildcards": "all"}, timeout=60)
        httpx.delete(f"{es_url}/_index_template/{target}", timeout=60)


def drop_table(stack: Any, names: Names) -> None:
    """The scylla-persister's table."""
    from fluxgate_scylla_persister.driver import CONNECTION_CLASS, Cluster

    cluster = Cluster([stack.cassandra_host], port=stack.cassandra_port, connection_class=CONNECTION_CLASS)
    try:
        cluster.connect().execute(f"DROP TABLE IF EXISTS {names.scylla_table}", timeout=120)
    finally:
        cluster.shutdown()


def drop_ringbuffer(stack: Any, names: Names) -> None:
    """The hazelcast-persister's ringbuffer."""
    # By name: to mypy, run from this folder, ``hazelcast`` is bench/hazelcast.py.
    client = importlib.import_module("hazelcast.client").HazelcastClient(
        cluster_members=[stack.hazelcast_address], cluster_name=stack.hazelcast_cluster
    )
    try:
        client.get_ringbuffer(names.store_target).blocking().destroy()
    finally:
        client.shutdown()


STAGES = {
    "aggregator": Stage("aggregator", ("fluxgate-aggregator", "run"), "FLUXGATE_AGG_", "readings",
                        aggregator_settings, windows_closed, windows_written, aggregator_details, drop_nothing),
    "es-persister": Stage("es-persister", ("fluxgate-es-persister",), "FLUXGATE_ES_", "aggregates",
                          es_settings, backlog_size, aggregates_confirmed, persister_details, drop_indices),
    "scylla-persister": Stage("scylla-persister", ("fluxgate-scylla-persister",), "FLUXGATE_SCYLLA_", "aggregates",
                              scylla_settings, backlog_size, aggregates_confirmed, persister_details, drop_table),
    "hazelcast-persister": Stage("hazelcast-persister", ("fluxgate-hazelcast-persister",), "FLUXGATE_HZ_",
                                 "aggregates", hazelcast_settings, backlog_size, aggregates_confirmed,
                                 persister_details, drop_ringbuffer),
    "device-status": Stage("device-status", ("fluxgate-device-status",), "FLUXGATE_STATUS_", "readings",
                           status_settings, backlog_size, readings_applied, no_details, drop_nothing),
}  # fmt: skip


def input_of(stage: Stage, names: Names) -> tuple[str, str]:
    """The topic a stage reads and the group whose committed offsets say how far it is."""
    topic = names.aggregated if stage.reads == "aggregates" else names.readings
    return topic, names.group(stage.name)


def topic_partitions(stage: Stage, names: Names, partitions: int) -> dict[str, int]:
    """The run's topics, 3 partitions each but the one the stage reads: ``partitions``."""
    topic, _ = input_of(stage, names)
    return {names.topic(name): 3 for name in TOPICS} | {topic: partitions}


def produce_backlog(stage: Stage, names: Names, stack: Any, args: argparse.Namespace) -> dict[str, Any]:
    topic, _ = input_of(stage, names)
    if stage.reads == "readings":
        return produce_in_child(stack.bootstrap, stack.registry_url, topic, readings_of(args))
    with ProcessPoolExecutor(1, get_context("spawn")) as pool:
        job = pool.submit(
            produce_aggregates, stack.bootstrap, stack.registry_url, topic, backlog_size(args), args.devices
        )
        return job.result()


def produce_aggregates(bootstrap: str, registry_url: str, topic: str, count: int, devices: int) -> dict[str, Any]:
    """``count`` aggregates (``_persisters.aggregates``) into ``topic``, keyed by device: in a spawned child."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict, schema_text
    from fluxgate_core.serde import AvroEncoder

    registry = SchemaRegistryClient({"url": registry_url})
    schema = TEMPERATURE_AGGREGATE
    encoder = AvroEncoder.registered(registry, topic, schema_text(schema), schema_dict(schema))

    def records() -> Iterator[dict[str, Any]]:
        yield from aggregates(count, devices)  # made inside produce's timing, as it always was

    def keyed(record: dict[str, Any]) -> tuple[bytes, bytes]:
        return record["device_id"].encode(), encoder.encode(record)

    seconds = produce(bootstrap, topic, records(), keyed, "aggregate")
    print(f"produced {count} aggregates to {topic} in {seconds:.1f}s", flush=True)
    return {"topic": topic, "records": count, "seconds": round(seconds, 1)}


def start(stage: Stage, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """The stage's console script, leader of its own process group (what it forks is counted)."""
    with log.open("ab") as out:
        argv = [str(BIN / stage.argv[0]), *stage.argv[1:]]
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def watch(
    stage: Stage, names: Names, process: subprocess.Popen[bytes], port: int, expected: int, args: argparse.Namespace
) -> list[Sample]:
    """Look every ``--poll`` s until caught up, ``--settle`` s past lag 0, the timeout, or its exit."""
    topic, group = input_of(stage, names)
    began, samples, idle_since = time.monotonic(), list[Sample](), None
    with Offsets(args.bootstrap) as offsets:
        while process.poll() is None and time.monotonic() - began < args.timeout:
            lag = offsets.behind(group, topic)
            done = stage.done(names, port, offsets)
            rss = group_memory_mib(process.pid, "VmRSS")
            sample = Sample(round(time.monotonic() - began, 2), lag, done, rss, os.getloadavg()[0], ready(port))
            samples.append(sample)
            if caught_up(sample, expected):
                break
            idle_since = (idle_since or time.monotonic()) if lag == 0 else None
            if idle_since is not None and time.monotonic() - idle_since > args.settle:
                break
            time.sleep(args.poll)
    return samples


def ready(port: int) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    return False


def run_stage(stage: Stage, stack: Any, args: argparse.Namespace) -> Result:
    names = run_names(f"backlog-{stage.name}")
    folder = RESULTS / names.prefix.rstrip("-")
    folder.mkdir(parents=True, exist_ok=True)
    create_topics(stack.bootstrap, topic_partitions(stage, names, args.partitions))
    produced = produce_backlog(stage, names, stack, args)
    expected, port = stage.expected(args), service_port()
    process = start(stage, stage_env(stage, names, stack, port, folder, args), folder / f"{stage.name}.log")
    print(f"{stage.name}: pid {process.pid}, port {port}, {backlog_size(args):,} records, expecting {expected:,}")
    try:
        samples = watch(stage, names, process, port, expected, args)
        peak, cpu = group_memory_mib(process.pid, "VmHWM"), group_cpu_seconds(process.pid)
        details = stage.details(folder, port, process)
    finally:
        exit_code = stop_child(process)
        stage.drop(stack, names)
    details |= {"produced": produced, "exit_code": exit_code, "prefix": names.prefix, "log": str(folder)}
    details["samples"] = [asdict(s) for s in samples]
    summary = summarise(samples, backlog_size(args), expected)
    done = samples[-1].done if samples else 0
    return Result(stage.name, backlog_size(args), expected, done, summary, cpu, peak, chart_limit_mib(stage.name),
                  details)  # fmt: skip


def leg_of(result: Result, args: argparse.Namespace) -> LegResult:
    summary = result.summary
    extra = {
        "catch-up s": summary.caught_up_s if summary.caught_up_s is not None else -1.0,
        "start-up s": summary.started_s if summary.started_s is not None else -1.0,
        "peak MiB": result.peak_mib,
        "polled max MiB": summary.peak_polled_mib,
        "limit MiB": result.limit_mib,
        "within limit": "yes" if result.within_limit else "no",
        "expected": float(result.expected),
        "done": float(result.done),
        "load max": summary.load[1],
    }
    live = with_live_traffic_s(result.records, summary.per_second, args.rate)
    extra["with live traffic s"] = live if live is not None else -1.0
    if "batches" in result.details:
        extra |= {"batches": result.details["batches"], "largest batch": result.details["largest_batch"],
                  "late": result.details["late_rows"]}  # fmt: skip
    return LegResult(result.stage, f"{result.records:,} backlog", summary.per_second,
                     micros_per(result.cpu_s, result.records), extra)  # fmt: skip


def report(args: argparse.Namespace, results: list[Result]) -> None:
    legs = [leg_of(result, args) for result in results]
    ratios = {f"{r.stage}_peak_over_limit": r.highest_mib / r.limit_mib for r in results}
    keys = ("stages", "seconds", "rate", "devices", "partitions", "poll", "timeout", "settings")
    settings = {key: getattr(args, key) for key in keys}
    title = f"Backlogs: {args.seconds:g} s at {args.rate:g} records/s, {args.partitions} partitions, then started"
    json_path, *_ = write_report("backlog", title, "record", legs, ratios, settings)
    document = json.loads(json_path.read_text())  # every look and detail in the JSON only
    document["results"] = [asdict(result) for result in results]
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    print_table("backlog", ["stage", "expected", "catch-up s", "records/s", "peak MiB", "limit MiB", "load max"],
                [[leg.group, f"{int(leg.extra['expected']):,}", leg.extra["catch-up s"], leg.per_second,
                  leg.extra["peak MiB"], leg.extra["limit MiB"], leg.extra["load max"]] for leg in legs])  # fmt: skip


def main() -> int:
    args = parse_args()
    stack = stack_up()
    args.bootstrap = stack.bootstrap
    results = []
    for name in args.stages.split(","):
        results.append(run_stage(STAGES[name], stack, args))
        print(json.dumps({k: v for k, v in asdict(results[-1]).items() if k != "details"}), flush=True)
    report(args, results)
    return 0 if all(r.summary.caught_up_s is not None and r.within_limit for r in results) else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the stage on the way out
    sys.exit(main())
