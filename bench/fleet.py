"""Hive's shape: a fleet of N devices, each reporting every P seconds (``fluxgate-sim
fleet``), through the whole pipeline with 1-minute windows, at one rate N / P for every N,
so what a reading costs compares across fleet sizes.

One pipeline of its own (prefixed topics, groups, MQTT root and store targets, as
``bench/pipeline.py`` and a soak run start it, plus the console) runs the points in order of
size. The fleets' device ids are nested (``fleet-0000001`` up to N), so each point's fleet
adds devices to the state the previous one left. For each point it:

* starts ``fluxgate-sim fleet --devices N --period N/rate`` and waits until device-status's
  table holds N devices (every device has reported once: about a period);
* measures ``--measure`` seconds: the CPU of every process group (each service with what it
  forked, each server of the stack, the fleet itself) per reading that reached the readings
  topic, and each consumer group's lag at both ends (held: every group under ``--held-lag-s``
  seconds of the rate behind at the end; the aggregator's micro-batches take tens of seconds
  at this shape, so its lag swings by a batch's worth);
* records each stage's resident memory now and at its peak (VmRSS, VmHWM of the group), and
  for the stages that keep state per device (device-status, the aggregator, the console,
  Hazelcast) bytes per device: the growth over the idle pipeline divided by the devices,
  and between points, the growth divided by the devices added (the marginal cost);
* the window close → readable latency in each store (p50/p99), for a sample of devices
  (``--sample``; polled every ``--poll`` seconds: the resolution), over the point's whole
  span: a full table scan per poll, as ``bench/pipeline.py`` does at 100 devices, would
  load the stores more than the fleet;
* Elasticsearch's daily index (documents, bytes, bytes per document and the size a day at
  the rate), Scylla's partitions (``SELECT DISTINCT``), the ringbuffer's items, and the
  aggregator's checkpoint (its per-device table and window ledger) on disk.

Results: ``bench-results/fleet.json``/``.md``/``.png`` and ``fleet-devices.png`` (cost per
reading and memory against devices).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _common import RESULTS, LegResult, full_jit, print_table, write_report
from fluxgate_testing import free_port

# pipeline (first of these) takes this folder off the path, as its elasticsearch.py and
# friends would shadow the client packages, and puts tools/ first for the rest.
from pipeline import STORES, FirstSeen, close_to_readable, group_cpu_seconds, group_memory_mib, group_peak_rss_mib
from prefixed_run import prepare, run_names, seconds, server_pids, wait_ready, whole
from run_pipeline import (
    PERSISTERS,
    Names,
    Offsets,
    Pipeline,
    device_prefix,
    start_all,
    start_console,
    stop_upstream_first,
    take_interrupts,
)
from soak_check import RING_READ_MAX, to_ms

BIN = Path(sys.executable).parent
# The stages that keep something per device, and where: device-status's table (faust), the
# aggregator's device clocks and window ledger (Spark), the console, the ringbuffer (Hazelcast).
PER_DEVICE = ("device-status", "aggregator", "console", "hazelcast")


def fleet_name(index: int, devices: int, prefix: str) -> str:
    """``fluxgate_sim.fleet.fleet_device_name``, which the fleet's ids follow."""
    from fluxgate_sim.fleet import fleet_device_name

    return fleet_device_name(index, devices, prefix)


@dataclass
class SampledSeen(FirstSeen):
    """``FirstSeen`` for a sample of the fleet's devices: each store is asked for those
    devices' windows only, and the ringbuffer is read on from its head when it has
    overwritten what was not read yet (it holds its capacity, not every window)."""

    sample: frozenset[str] = frozenset()
    overwritten: int = 0  # items the ringbuffer dropped before they were read

    def _search(self, http: httpx.Client) -> Iterator[tuple[str, int]]:
        since = int((time.time() - 900) * 1000)
        query = {"bool": {"filter": [{"terms": {"device_id": sorted(self.sample)}},
                                     {"range": {"window_start": {"gte": since}}}]}}  # fmt: skip
        body = {"size": 10_000, "_source": ["device_id", "window_start"], "query": query}
        with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
            reply = http.post(f"{self.es_url}/{self.es_alias}/_search", json=body)
            for hit in reply.json()["hits"]["hits"]:
                yield hit["_source"]["device_id"], to_ms(hit["_source"]["window_start"])

    def _select(self) -> Iterator[tuple[str, int]]:
        session = self.stores.scylla_session()
        if session is None:
            return
        devices = ", ".join(f"'{device}'" for device in sorted(self.sample))
        day = datetime.now(UTC).date().isoformat()
        cql = (f"SELECT device_id, window_start FROM {self.table} WHERE device_id IN ({devices}) "  # noqa: S608
               f"AND metric = 'temperature' AND day = '{day}'")  # fmt: skip
        with contextlib.suppress(Exception):  # no table yet
            for row in session.execute(cql):
                yield row[0], to_ms(row[1])

    def _ring(self) -> Iterator[tuple[str, int]]:
        client = self.stores.hazelcast_client()
        if client is None:
            return
        with contextlib.suppress(Exception):  # no ringbuffer yet
            ring = client.get_ringbuffer(self.ringbuffer).blocking()
            head, tail = ring.head_sequence(), ring.tail_sequence()
            if self._next < head:
                self.overwritten += head - self._next
                self._next = head
            while self._next <= tail:
                items = ring.read_many(self._next, 1, min(RING_READ_MAX, tail + 1 - self._next))
                self._next += len(items)
                for item in items:
                    document = json.loads(item.to_string() if hasattr(item, "to_string") else item)
                    if document["device_id"] in self.sample:
                        yield document["device_id"], to_ms(document["window_start"])


@dataclass
class Point:
    devices: int
    period_s: float
    started: float = 0.0  # wall time the fleet started
    filled_s: float = 0.0  # until device-status held every device
    table_devices: int = 0  # in device-status's table then (fewer when it fell behind)
    measure_start: float = 0.0
    measure_end: float = 0.0
    readings: int = 0  # reached the readings topic while measured
    aggregates: int = 0  # written to the aggregates topic while measured
    cpu_us: dict[str, float] = field(default_factory=dict)  # per reading, per process group
    rss_mib: dict[str, float] = field(default_factory=dict)
    peak_mib: dict[str, float] = field(default_factory=dict)
    bytes_per_device: dict[str, float] = field(default_factory=dict)  # growth over the idle pipeline / N
    marginal_bytes_per_device: dict[str, float] = field(default_factory=dict)  # growth over the point before
    lag: dict[str, list[int]] = field(default_factory=dict)  # per group: at the start and end of the measure
    held: bool = False
    latency: dict[str, dict[str, float]] = field(default_factory=dict)
    stores: dict[str, Any] = field(default_factory=dict)
    fleet_log: str = ""

    @property
    def rate(self) -> float:
        return self.readings / (self.measure_end - self.measure_start) if self.measure_end > self.measure_start else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="100000,300000,1000000", help="fleet sizes, increasing")
    parser.add_argument("--rate", type=float, default=1000.0, help="reports/s of every point: period = devices / rate")
    parser.add_argument("--jitter", type=float, default=0.1)
    parser.add_argument("--connections", type=int, default=4, help="the fleet's MQTT connections (hubs)")
    parser.add_argument("--measure", type=float, default=60.0, help="seconds of each point measured, once filled")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="30 seconds")
    parser.add_argument("--sample", type=int, default=200, help="devices whose windows are timed in every store")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between looks into the stores")
    parser.add_argument("--held-lag-s", type=float, default=120.0, help="held: each group this close behind")
    parser.add_argument("--qos", type=int, default=1)
    parser.add_argument(
        "--aggregator-heap",
        default="2g",
        help="the aggregator's heap (SPARK__DRIVER_MEMORY); a pod's follows its memory limit",
    )
    args = parser.parse_args()
    # What run_pipeline's start_all reads: no devices of its own (the fleets are started here).
    args.mqtt_devices, args.coap_devices = 0, 0
    args.malformed = args.late = args.late_by = 0
    args.sizes = [int(n) for n in args.devices.split(",")]
    return whole(args)


def main() -> int:
    args = parse_args()
    take_interrupts()  # a Ctrl-C still stops every child it started
    full_jit()  # prepare() brings the stack up through ensure_up
    names = run_names("fleet")
    folder = RESULTS / f"fleet-{names.prefix.rstrip('-')}"
    endpoints, pipeline, stores, ports = prepare(names, folder, args)
    sample = frozenset(fleet_name(i * (min(args.sizes) // args.sample), min(args.sizes), names.prefix.replace(".", "-"))
                       for i in range(args.sample))  # fmt: skip
    seen = SampledSeen(stores, endpoints.elasticsearch_url, names.es_alias, names.scylla_table, names.store_target,
                       args.poll, sample=sample)  # fmt: skip
    servers = server_pids()
    points: list[Point] = []
    # A fleet device is silent for a period between reports: device-status's silence threshold
    # (60 s by default) below it would mark every device OFFLINE, and ONLINE again, each period.
    # Its children inherit this process's environment.
    os.environ.setdefault("FLUXGATE_STATUS_STATUS__SILENCE_THRESHOLD_S", f"{2 * max(args.sizes) / args.rate:g}")
    # No cgroup limit here, so the job would keep Spark's 1 GiB, full at every point: its
    # collector's work then grew with the fleet (bench/results/2026-12-01-aggregator-cold-devices.md).
    os.environ["FLUXGATE_AGG_SPARK__DRIVER_MEMORY"] = args.aggregator_heap
    try:
        start_all(pipeline, args, names, ports=ports, devices=False)
        start_console(pipeline, free_port(), names, health_port=free_port())
        wait_ready(ports["mqtt-proxy"], 120)
        wait_ready(ports["aggregator"], 300)  # its query runs: Spark's JVM is up (the idle memory counts it)
        time.sleep(20)  # Spark's first (empty) batches, the persisters' connections
        leaders = {name: process.pid for name, process in pipeline.children} | servers
        idle = {name: group_rss_mib(pid) for name, pid in leaders.items()}
        print(json.dumps({"idle_rss_mib": idle}), flush=True)
        seen.run()
        with Offsets(endpoints.bootstrap) as offsets:
            for devices in args.sizes:
                point = Point(devices, devices / args.rate)
                run_point(point, pipeline, args, names, offsets, servers, folder)
                before = points[-1] if points else None
                point.bytes_per_device = per_device(point, idle, devices, point.table_devices)
                point.marginal_bytes_per_device = (
                    per_device(point, before.rss_mib, devices - before.devices,
                               point.table_devices - before.table_devices)
                    if before else point.bytes_per_device
                )  # fmt: skip
                point.stores = store_figures(endpoints, names, point, seen, args.checkpoints)
                points.append(point)
                print(json.dumps(summary(point)), flush=True)
    finally:
        seen.stop()
        pipeline.stop("fleet")  # stop_upstream_first knows the simulator, not a fleet
        # Nothing is checked after a fleet leg: a short drain, not the pipeline's 90 s a stage.
        stop_upstream_first(pipeline, endpoints.bootstrap, timeout=30, names=names)
        stores.close()
    if not points:
        return 1
    window_ms, watermark_ms = seconds(args.window) * 1000, seconds(args.watermark) * 1000
    for point in points:
        point.latency = latencies(point, seen, window_ms, watermark_ms)
    report(args, points, folder, seen.overwritten)
    return 0 if points and all(point.held for point in points) else 1


def fleet_argv(args: argparse.Namespace, names: Names, point: Point) -> list[str]:
    """One metric (temperature: every reading is aggregated), no faults: load, not faults."""
    return [str(BIN / "fluxgate-sim"), "fleet", "--devices", str(point.devices), "--period", f"{point.period_s:g}",
            "--jitter", str(args.jitter), "--mqtt-connections", str(args.connections), "--qos", str(args.qos),
            "--metrics", "temperature", "--seed", "7", "--mqtt-root", names.mqtt_root,
            *device_prefix(names)]  # fmt: skip


def run_point(
    point: Point, pipeline: Pipeline, args: argparse.Namespace, names: Names, offsets: Offsets,
    servers: dict[str, int], folder: Path,
) -> None:  # fmt: skip
    if pipeline.running("fleet"):
        pipeline.stop("fleet")
    point.started = time.time()
    pipeline.start("fleet", fleet_argv(args, names, point))
    deadline = time.monotonic() + point.period_s * (1 + 2 * args.jitter) + 180
    while table_devices(args.status_port) < point.devices:
        if time.monotonic() > deadline:
            print(f"device-status holds {table_devices(args.status_port)} of {point.devices} devices", flush=True)
            break
        time.sleep(5)
    point.filled_s = round(time.time() - point.started, 1)
    point.table_devices = table_devices(args.status_port)
    leaders = {name: process.pid for name, process in pipeline.children} | servers
    groups = {"aggregator": names.readings, "device-status": names.readings} | dict.fromkeys(
        PERSISTERS, names.aggregated
    )
    lag_before = {name: offsets.behind(names.group(name), topic) for name, topic in groups.items()}
    cpu_before = {name: group_cpu_seconds(pid) for name, pid in leaders.items()}
    readings_before, aggregates_before = total(offsets, names.readings), total(offsets, names.aggregated)
    point.measure_start = time.time()
    time.sleep(args.measure)
    point.measure_end = time.time()
    point.readings = total(offsets, names.readings) - readings_before
    point.aggregates = total(offsets, names.aggregated) - aggregates_before
    cpu = {name: group_cpu_seconds(pid) - cpu_before[name] for name, pid in leaders.items()}
    point.cpu_us = {name: round(used / max(point.readings, 1) * 1e6, 1) for name, used in cpu.items()}
    point.rss_mib = {name: group_rss_mib(pid) for name, pid in leaders.items()}
    point.peak_mib = {name: group_peak_rss_mib(pid) for name, pid in leaders.items()}
    point.lag = {name: [lag_before[name], offsets.behind(names.group(name), topic)] for name, topic in groups.items()}
    # device-status's group is faust's: its committed offsets trail by its commit interval.
    point.held = all(end <= args.held_lag_s * args.rate for _, end in point.lag.values())
    point.fleet_log = (folder / "fleet.log").read_text(errors="replace").splitlines()[-1][:300]


def total(offsets: Offsets, topic: str) -> int:
    return sum(offsets.ends(topic).values())


def table_devices(port: int) -> int:
    """Devices in device-status's table, by its ``fluxgate_status_devices`` gauge (every status)."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("fluxgate_status_devices{")))  # fmt: skip
    return 0


def group_rss_mib(leader: int) -> float:
    """Resident memory now (VmRSS) of ``leader``'s process group, summed, in MiB
    (``pipeline.group_peak_rss_mib`` gives the peak)."""
    return group_memory_mib(leader, "VmRSS")


def per_device(point: Point, base: dict[str, float], devices: int, in_table: int) -> dict[str, float]:
    """Growth over ``base`` per device; device-status's per device in its table (it may lag)."""
    return {name: round((point.rss_mib[name] - base.get(name, 0.0)) * 2**20
                        / max(in_table if name == "device-status" else devices, 1))
            for name in PER_DEVICE if name in point.rss_mib}  # fmt: skip


def store_figures(endpoints: Any, names: Names, point: Point, seen: SampledSeen, checkpoints: Path) -> dict[str, Any]:
    """Elasticsearch's daily indices, Scylla's partitions, the ringbuffer, the aggregator's checkpoint."""
    figures: dict[str, Any] = {"aggregator_checkpoint_bytes": folder_bytes(checkpoints)}
    with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
        reply = httpx.get(f"{endpoints.elasticsearch_url}/{names.es_alias}/_stats/store,docs", timeout=30).json()
        indices = {name: {"docs": index["primaries"]["docs"]["count"],
                          "bytes": index["primaries"]["store"]["size_in_bytes"]}
                   for name, index in reply["indices"].items()}  # fmt: skip
        docs, size = sum(i["docs"] for i in indices.values()), sum(i["bytes"] for i in indices.values())
        per_doc = size / max(docs, 1)
        figures["elasticsearch"] = {"indices": indices, "bytes_per_document": round(per_doc, 1),
                                    # A fleet device reports less often than a window: an aggregate a reading.
                                    "gib_per_day_at_rate": round(per_doc * point.rate * 86_400 / 2**30, 2)}  # fmt: skip
    started = time.monotonic()
    session = seen.stores.scylla_session()
    with contextlib.suppress(Exception):
        if session is not None:
            rows = session.execute(f"SELECT DISTINCT device_id, metric, day FROM {names.scylla_table}", timeout=600)  # noqa: S608
            figures["scylla_partitions"] = sum(1 for _ in rows)
            figures["scylla_distinct_seconds"] = round(time.monotonic() - started, 1)
    client = seen.stores.hazelcast_client()
    with contextlib.suppress(Exception):
        if client is not None:
            ring = client.get_ringbuffer(names.store_target).blocking()
            figures["hazelcast_ring"] = {"items": ring.size(), "capacity": ring.capacity(),
                                         "written": ring.tail_sequence() + 1}  # fmt: skip
    return figures


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def latencies(point: Point, seen: SampledSeen, window_ms: int, watermark_ms: int) -> dict[str, dict[str, float]]:
    """Per store, seconds from close to readable of the sample's windows that began after the
    point's fleet started and closed before its measure ended."""
    return close_to_readable(seen, point.started, point.measure_end, window_ms, watermark_ms)


def summary(point: Point) -> dict[str, Any]:
    return {key: value for key, value in asdict(point).items() if key not in ("latency",)}


def stages(points: list[Point]) -> list[str]:
    """Every process group measured, costliest first (at the last point)."""
    return sorted(points[-1].cpu_us, key=lambda name: -points[-1].cpu_us[name])


def report(args: argparse.Namespace, points: list[Point], folder: Path, overwritten: int) -> None:
    legs = []
    for point in points:
        extra: dict[str, Any] = {"devices": point.devices, "period s": point.period_s, "filled s": point.filled_s,
                                 "held": float(point.held), "readings": point.readings}  # fmt: skip
        extra |= {f"{name} us": value for name, value in point.cpu_us.items()}
        extra |= {f"{name} peak MiB": value for name, value in point.peak_mib.items()}
        extra |= {f"{name} B/device": value for name, value in point.bytes_per_device.items()}
        extra |= {f"{name} marginal B/device": value for name, value in point.marginal_bytes_per_device.items()}
        for store, figure in point.latency.items():
            extra |= {f"{store} p50 s": figure["p50"], f"{store} p99 s": figure["p99"]}
        extra |= {"es bytes/doc": point.stores.get("elasticsearch", {}).get("bytes_per_document", 0.0),
                  "es GiB/day": point.stores.get("elasticsearch", {}).get("gib_per_day_at_rate", 0.0),
                  "scylla partitions": point.stores.get("scylla_partitions", -1)}  # fmt: skip
        pipeline_us = sum(us for name, us in point.cpu_us.items() if name != "fleet")
        legs.append(LegResult("fleet", f"{point.devices:,} devices", point.rate, pipeline_us, extra))
    keys = ("devices", "rate", "jitter", "connections", "measure", "window", "watermark", "sample", "poll", "qos",
            "aggregator_heap")  # fmt: skip
    settings = {key: getattr(args, key) for key in keys}
    settings |= {"run": str(folder), "ring_overwritten_before_read": overwritten,
                 "points": [asdict(point) for point in points]}  # fmt: skip
    write_report("fleet", "A fleet through the whole pipeline (Hive's shape)", "reading", legs,
                 {"devices held": float(max((p.devices for p in points if p.held), default=0))}, settings)  # fmt: skip
    chart(points, RESULTS / "fleet-devices.png")
    names = stages(points)
    rows = [[f"{p.devices:,}", f"{p.rate:.0f}", *(p.cpu_us.get(n, 0.0) for n in names)] for p in points]
    print_table("fleet: CPU µs per reading", ["devices", "readings/s", *names], rows)
    print_table("fleet: memory", ["devices", *(f"{n} MiB / B/dev" for n in PER_DEVICE)],
                [[f"{p.devices:,}", *(f"{p.rss_mib.get(n, 0)} / {p.bytes_per_device.get(n, '-')}" for n in PER_DEVICE)]
                 for p in points])  # fmt: skip
    print_table("fleet: latency and stores", ["devices", *(f"{s} p50/p99 s" for s in STORES), "ES B/doc", "partitions"],
                [[f"{p.devices:,}", *(latency_cell(p, s) for s in STORES),
                  p.stores.get("elasticsearch", {}).get("bytes_per_document", "-"),
                  p.stores.get("scylla_partitions", "-")] for p in points])  # fmt: skip


def latency_cell(point: Point, store: str) -> str:
    figure = point.latency.get(store, {})
    return f"{figure.get('p50', '-')}/{figure.get('p99', '-')}"


def chart(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (cost, memory) = pyplot.subplots(1, 2, figsize=(13, 5))
    devices = [point.devices for point in points]
    for name in [n for n in stages(points) if n != "fleet"][:9]:
        cost.plot(devices, [point.cpu_us.get(name, 0.0) for point in points], marker="o", label=name)
    cost.set_xscale("log")
    cost.set_xlabel("devices (same readings/s at every point)")
    cost.set_ylabel("CPU µs per reading")
    cost.set_title("Cost per reading against devices")
    cost.legend(fontsize=7)
    cost.grid(alpha=0.3)
    for name in PER_DEVICE:
        memory.plot(devices, [point.rss_mib.get(name, 0.0) for point in points], marker="o", label=name)
    memory.set_xscale("log")
    memory.set_xlabel("devices")
    memory.set_ylabel("resident memory, MiB")
    memory.set_title("Memory of the stages with per-device state")
    memory.legend(fontsize=7)
    memory.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
