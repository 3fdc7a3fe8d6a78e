"""The whole pipeline at load: MQTT devices at increasing rates through every service into
every store, each rate held for ``--hold`` seconds, then every reading accounted for.

One pipeline of its own (prefixed topics, groups, MQTT root and store targets, as a soak
run's; see ``tools/prefixed_run.py``) runs for the whole benchmark. Each step starts simulated MQTT
devices of its own (one metric, temperature, so every reading is aggregated) at the step's
rate for ``--hold`` seconds, and measures:

* the rate the devices reached (from the simulator's ledger) and what arrived on the
  readings topic in the same span;
* whether the pipeline held it: within ``--drain-timeout`` seconds of the devices stopping,
  the aggregator has read every reading and each persister every aggregate;
* the CPU of every process (each service with its children, e.g. Spark's JVM, and each
  server of the stack) per reading sent in the step;
* per store, the latency from a window's close (its end plus the watermark, in wall time:
  the devices stamp readings with the time they send them) to the aggregate being readable
  in Elasticsearch, Scylla and Hazelcast, polled every ``--poll`` seconds (the resolution),
  for the windows that closed while the step's devices were sending.

Steps go up until one is not held (or the devices themselves cannot send at the rate).
At the end the gateways' clock is moved past every window and ``tools/soak_check.py`` checks,
from the ledger, that every store holds every window exactly (the highest held rate counts
only when that check passes). Next to it stand the per-service legs of the same
``make bench`` run (``bench-results/<leg>.json``, when present): what each stage costs
alone. Results: ``bench-results/pipeline.json``/``.md``/``.png`` and
``pipeline-latency.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
from _common import RESULTS, ROOT, LegResult, cpu_seconds, full_jit, print_table, write_report

# This folder (first on the path when run as a script) holds elasticsearch.py, hazelcast.py
# and scylla.py, which would shadow the client packages the stores are read with.
sys.path[:] = [str(ROOT / "tools")] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from pipeline_stores import Stores  # noqa: E402 - after the path is set
from prefixed_run import (  # noqa: E402 - after the path is set
    SERVICES,
    closing_wait,
    prepare,
    push_watermark,
    run_names,
    seconds,
    server_pids,
    settle,
    wait_ready,
    whole,
)
from run_pipeline import PERSISTERS, Names, Offsets, Pipeline, devices_argv, start_all, stop_upstream_first  # noqa: E402 - after the path is set
from soak_check import RING_READ_MAX, Check, check, save, to_ms  # noqa: E402 - after the path is set

STORES = ("elasticsearch", "scylla", "hazelcast")
# The per-service legs of the same `make bench`, by their names there: (file, group, leg, what one item is).
ALONE = {
    "mqtt-proxy": ("mqtt_proxy", "QoS 1", "mqtt-proxy", "message"),
    "aggregator": ("aggregator", "", "job", "reading"),
    "es-persister": ("elasticsearch", "", "persister (Kafka -> ES process)", "aggregate"),
    "scylla-persister": ("scylla", "", "persister (Kafka -> Cassandra process)", "aggregate"),
    "hazelcast-persister": ("hazelcast", "", "persister x1 (Kafka -> HZ)", "aggregate"),
}


def group_pids(leader: int) -> list[int]:
    """Every process in ``leader``'s process group: a service and what it forked (the
    aggregator's Spark JVM); each child is started as the leader of its own session."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == leader:  # field 5: the process group
                pids.append(int(stat.parent.name))
    return pids


def group_cpu_seconds(leader: int) -> float:
    return sum(cpu_seconds(pid) for pid in group_pids(leader))


def group_peak_rss_mib(leader: int) -> float:
    """Peak resident memory (VmHWM) of ``leader``'s process group, summed, in MiB: what a
    pod of that service needs (the charts' memory defaults)."""
    return group_memory_mib(leader, "VmHWM")


def group_memory_mib(leader: int, figure: str) -> float:
    """A memory figure of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``) of ``leader``'s
    process group, summed, in MiB."""
    total_kib = 0
    for pid in group_pids(leader):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(f"{figure}:"):
                    total_kib += int(line.split()[1])
    return round(total_kib / 1024, 1)


@dataclass
class FirstSeen:
    """When each window (device, start) was first readable in each store, polled in a thread."""

    stores: Stores
    es_url: str
    es_alias: str
    table: str
    ringbuffer: str
    every: float
    seen: dict[str, dict[tuple[str, int], float]] = field(default_factory=lambda: {s: {} for s in STORES})
    _next: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, name="first-seen", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self._stop.wait(self.every):
                for store, windows in (("elasticsearch", self._search(http)), ("scylla", self._select()),
                                       ("hazelcast", self._ring())):  # fmt: skip
                    now = time.time()
                    for window in windows:
                        self.seen[store].setdefault(window, now)

    def _search(self, http: httpx.Client) -> Iterator[tuple[str, int]]:
        # What a user's search sees: no forced refresh, the index's own refresh interval.
        since = int((time.time() - 120) * 1000)
        body = {"size": 10_000, "_source": ["device_id", "window_start"],
                "query": {"range": {"window_start": {"gte": since}}}}  # fmt: skip
        with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
            reply = http.post(f"{self.es_url}/{self.es_alias}/_search", json=body)
            for hit in reply.json()["hits"]["hits"]:
                yield hit["_source"]["device_id"], to_ms(hit["_source"]["window_start"])

    def _select(self) -> Iterator[tuple[str, int]]:
        session = self.stores.scylla_session()
        if session is None:
            return
        with contextlib.suppress(Exception):  # no table yet
            for row in session.execute(f"SELECT device_id, window_start FROM {self.table}"):  # noqa: S608
                yield row[0], to_ms(row[1])

    def _ring(self) -> Iterator[tuple[str, int]]:
        client = self.stores.hazelcast_client()
        if client is None:
            return
        with contextlib.suppress(Exception):  # no ringbuffer yet
            ring = client.get_ringbuffer(self.ringbuffer).blocking()
            tail = ring.tail_sequence()
            while self._next <= tail:
                items = ring.read_many(self._next, 1, min(RING_READ_MAX, tail + 1 - self._next))
                self._next += len(items)
                for item in items:
                    document = json.loads(item.to_string() if hasattr(item, "to_string") else item)
                    yield document["device_id"], to_ms(document["window_start"])


@dataclass
class Step:
    target: float  # readings/s asked of the devices
    devices: str  # the step's device prefix
    start: float = 0.0
    end: float = 0.0
    sent: int = 0
    arrived: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds per process over the step
    drained: dict[str, str] = field(default_factory=dict)
    drain_s: float = 0.0
    held: bool = False
    latency: dict[str, dict[str, float]] = field(default_factory=dict)
    # The aggregator's own split of its micro-batches over the step (its /metrics): batches,
    # and seconds per batch in each phase of ours and each part of Spark's trigger.
    aggregator: dict[str, float] = field(default_factory=dict)
    peak_rss_mib: dict[str, float] = field(default_factory=dict)  # per process, at the step's end

    @property
    def reached(self) -> float:
        return self.sent / (self.end - self.start) if self.end > self.start else 0.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="250,1000,4000,8000,12000,16000", help="readings/s of each step, increasing")
    parser.add_argument("--hold", type=float, default=60.0, help="seconds each rate is held")
    parser.add_argument("--mqtt-devices", type=int, default=100)
    parser.add_argument("--window", default="10 seconds")
    parser.add_argument("--watermark", default="5 seconds")
    parser.add_argument("--drain-timeout", type=float, default=30.0, help="held: all read within this")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between looks into the stores")
    parser.add_argument("--qos", type=int, default=1)
    args = parser.parse_args()
    # What run_pipeline's start_all reads; no CoAP devices, nothing malformed or late: load, not faults.
    args.coap_devices, args.rate, args.malformed, args.late, args.late_by = 0, 1.0, 0, 0, 0
    return whole(args)


def main() -> int:
    args = parse_args()
    full_jit()  # prepare() brings the stack up through ensure_up
    names = run_names("bench")
    prefix = names.prefix
    folder = RESULTS / f"pipeline-{prefix.rstrip('-')}"
    endpoints, pipeline, stores, ports = prepare(names, folder, args)
    ledger = folder / "ledger.jsonl"
    seen = FirstSeen(stores, endpoints.elasticsearch_url, names.es_alias, names.scylla_table, names.store_target,
                     args.poll)  # fmt: skip
    servers = server_pids()
    steps: list[Step] = []
    started_ms = int(time.time() * 1000)
    try:
        start_all(pipeline, args, names, ports=ports, devices=False)
        wait_ready(ports["mqtt-proxy"], 120)
        seen.run()
        warm(pipeline, args, names, ledger)
        with Offsets(endpoints.bootstrap) as offsets:
            for number, rate in enumerate(float(r) for r in args.rates.split(",")):
                step = Step(rate, f"{prefix}s{number}-")
                run_step(step, pipeline, args, names, ledger, offsets, servers, ports["aggregator"])
                steps.append(step)
                print(f"step {rate:.0f}/s: reached {step.reached:.0f}/s, held={step.held} ({step.drained})", flush=True)
                if not step.held or step.reached < 0.9 * rate:
                    break
        push_watermark("127.0.0.1", 1883, names, f"{prefix}watermark", closing_wait(args))
        settle(endpoints.bootstrap, names)
        with Offsets(endpoints.bootstrap) as offsets:
            for name in PERSISTERS:
                print(offsets.caught_up(names.group(name), names.aggregated, 120), flush=True)
        time.sleep(3 * args.poll + 2)  # the last windows seen by the poller too
    finally:
        seen.stop()
        stop_upstream_first(pipeline, endpoints.bootstrap, names=names)
    window_ms, watermark_ms = seconds(args.window) * 1000, seconds(args.watermark) * 1000
    for step in steps:
        step.latency = latencies(step, seen, window_ms, watermark_ms)
    spec = Check(ledger, endpoints, prefix, names.es_alias, names.store_target, [], window_ms=window_ms,
                 excluded=f"{prefix}watermark", whole_from_ms=started_ms)  # fmt: skip
    save(spec, folder / "check.json")
    result = check(spec)
    stores.close()
    report(args, steps, result.passed, result.problems, result.figures, folder)
    return 0 if result.passed else 1


def warm(pipeline: Pipeline, args: argparse.Namespace, names: Names, ledger: Path) -> None:
    """Ten seconds at the first step's rate, unmeasured: Spark's first batches, connections, caches."""
    rate = float(args.rates.split(",")[0])
    devices(pipeline, args, names, ledger, f"{names.prefix}warm-", rate, 10.0)
    pipeline.process("simulator").wait()


def devices(
    pipeline: Pipeline, args: argparse.Namespace, names: Names, ledger: Path, prefix: str, rate: float, hold: float
) -> None:
    fleet = SimpleNamespace(**{**vars(args), "rate": rate / args.mqtt_devices})
    extra = ("--device-prefix", prefix, "--metrics", "temperature", "--duration", str(hold), "--ledger", str(ledger),
             "--qos", str(args.qos))  # fmt: skip
    # The step's own device prefix comes after the run's: the simulator takes the last one given.
    pipeline.start("simulator", devices_argv(fleet, names, extra))  # type: ignore[arg-type]


def run_step(
    step: Step, pipeline: Pipeline, args: argparse.Namespace, names: Names, ledger: Path, offsets: Offsets,
    servers: dict[str, int], aggregator_port: int,
) -> Step:  # fmt: skip
    leaders = {name: pipeline.process(name).pid for name in SERVICES} | servers
    before = {name: group_cpu_seconds(pid) for name, pid in leaders.items()}
    split_before = batch_split(aggregator_port)
    topic_before = sum(offsets.ends(names.readings).values())
    step.start = time.time()
    devices(pipeline, args, names, ledger, step.devices, step.target, args.hold)
    pipeline.process("simulator").wait()
    step.end = time.time()
    step.cpu = {name: group_cpu_seconds(pid) - before[name] for name, pid in leaders.items()}
    step.aggregator = per_batch(split_before, batch_split(aggregator_port))
    step.peak_rss_mib = {name: group_peak_rss_mib(pid) for name, pid in leaders.items()}
    step.sent = sum(1 for entry in ledger_entries(ledger) if entry["d"].startswith(step.devices))
    drain = time.monotonic()
    step.drained = {"aggregator": offsets.caught_up(names.group("aggregator"), names.readings, args.drain_timeout)}
    for name in PERSISTERS:
        left = max(args.drain_timeout - (time.monotonic() - drain), 1.0)
        step.drained[name] = offsets.caught_up(names.group(name), names.aggregated, left)
    step.drain_s = round(time.monotonic() - drain, 1)
    step.arrived = sum(offsets.ends(names.readings).values()) - topic_before
    step.held = not any(text.startswith("NOT") for text in step.drained.values())
    return step


def batch_split(port: int) -> dict[str, float]:
    """The aggregator's summed seconds per phase (ours) and per part of Spark's trigger, and
    its batch count, from its /metrics; empty when it does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    with contextlib.suppress(httpx.HTTPError):
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "fluxgate_aggregator_phase_seconds_sum":
                    totals[f"phase {sample.labels['phase']}"] = sample.value
                elif sample.name == "fluxgate_aggregator_phase_seconds_count" and sample.labels["phase"] == "read":
                    totals["batches"] = sample.value
                elif sample.name == "fluxgate_aggregator_trigger_seconds_total":
                    totals[f"spark {sample.labels['part']}"] = sample.value
    return totals


def per_batch(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Seconds per batch of each phase and part over a step, with the step's batch count."""
    batches = after.get("batches", 0.0) - before.get("batches", 0.0)
    if batches <= 0:
        return {}
    split = {key: round((value - before.get(key, 0.0)) / batches, 3) for key, value in after.items()}
    return split | {"batches": batches}


def ledger_entries(ledger: Path) -> Iterator[dict[str, Any]]:
    with ledger.open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def latencies(step: Step, seen: FirstSeen, window_ms: int, watermark_ms: int) -> dict[str, dict[str, float]]:
    """Per store, seconds from close to readable of the step's windows that closed while it sent."""
    return close_to_readable(seen, step.start, step.end, window_ms, watermark_ms, step.devices)


def close_to_readable(
    seen: FirstSeen, start: float, end: float, window_ms: int, watermark_ms: int, devices: str = ""
) -> dict[str, dict[str, float]]:
    """Per store, p50 and p99 seconds from close to readable of the windows (of the devices
    whose names begin with ``devices``) that began at ``start`` or later and closed by ``end``
    (epoch seconds)."""
    figures: dict[str, dict[str, float]] = {}
    start_ms, end_ms = start * 1000, end * 1000
    for store, windows in seen.seen.items():
        delays = sorted(
            first - (begin + window_ms + watermark_ms) / 1000
            for (device, begin), first in windows.items()
            if device.startswith(devices) and begin >= start_ms and begin + window_ms + watermark_ms <= end_ms
        )
        if delays:
            figures[store] = {"p50": percentile(delays, 50), "p99": percentile(delays, 99), "windows": len(delays)}
    return figures


def percentile(ordered: list[float], p: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))], 2)


def alone() -> dict[str, dict[str, Any]]:
    """The per-service legs of this `make bench` run, when they ran before this one."""
    legs: dict[str, dict[str, Any]] = {}
    for service, (file, group, leg, item) in ALONE.items():
        path = RESULTS / f"{file}.json"
        with contextlib.suppress(OSError, ValueError, KeyError):
            document = json.loads(path.read_text())
            for entry in document["legs"]:
                if (entry["group"], entry["leg"]) == (group, leg):
                    measured = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
                    legs[service] = {"per_second": entry["per_second"], "cpu_us": entry["cpu_us"], "item": item,
                                     "measured": measured}  # fmt: skip
    return legs


def report(
    args: argparse.Namespace, steps: list[Step], passed: bool, problems: list[str], figures: dict[str, Any],
    folder: Path,
) -> None:  # fmt: skip
    legs = []
    for step in steps:
        per_reading = {name: round(cpu / max(step.sent, 1) * 1e6, 1) for name, cpu in step.cpu.items()}
        extra: dict[str, float] = {"target": step.target, "held": float(step.held), "drain_s": step.drain_s,
                                   "sent": step.sent, "arrived": step.arrived}  # fmt: skip
        extra |= {f"{name} us": value for name, value in per_reading.items()}
        for store, figure in step.latency.items():
            extra |= {f"{store} p50 s": figure["p50"], f"{store} p99 s": figure["p99"]}
        extra |= {f"aggregator {key} s/batch" if key != "batches" else "aggregator batches": value
                  for key, value in step.aggregator.items()}  # fmt: skip
        extra |= {f"{name} peak MiB": value for name, value in step.peak_rss_mib.items()}
        legs.append(LegResult(f"{step.target:.0f}/s", "pipeline", step.reached, sum(per_reading.values()), extra))
    held = [step for step in steps if step.held and step.reached >= 0.9 * step.target]
    top = max(held, key=lambda step: step.reached) if held and passed else None
    ratios = {"held readings/s": top.reached if top else 0.0, "check passed": float(passed)}
    settings = {key: getattr(args, key) for key in ("rates", "hold", "mqtt_devices", "window", "watermark", "qos")}
    settings |= {"alone": alone(), "problems": problems[:20], "figures": figures, "run": str(folder)}
    write_report("pipeline", "The whole pipeline at load (MQTT devices → every store)", "reading", legs, ratios,
                 settings)  # fmt: skip
    latency_chart(steps, RESULTS / "pipeline-latency.png")
    print_table("pipeline", ["target/s", "reached/s", "held", "CPU µs/reading", *(f"{s} p50/p99 s" for s in STORES)],
                [[f"{leg.extra['target']:.0f}", f"{leg.per_second:.0f}", bool(leg.extra["held"]), f"{leg.cpu_us:.0f}",
                  *(f"{leg.extra.get(f'{s} p50 s', '-')}/{leg.extra.get(f'{s} p99 s', '-')}" for s in STORES)]
                 for leg in legs])  # fmt: skip
    print(json.dumps({"held": ratios["held readings/s"], "passed": passed, "problems": problems[:5]}), flush=True)


def latency_chart(steps: list[Step], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axis = pyplot.subplots(figsize=(8, 4.5))
    for store in STORES:
        points = [(step.reached, step.latency[store]) for step in steps if store in step.latency]
        if points:
            axis.plot([x for x, _ in points], [f["p50"] for _, f in points], marker="o", label=f"{store} p50")
            axis.plot([x for x, _ in points], [f["p99"] for _, f in points], marker="x", linestyle="--",
                      label=f"{store} p99")  # fmt: skip
    axis.set_xlabel("readings/s reached")
    axis.set_ylabel("seconds from window close to readable")
    axis.set_title("Window close → aggregate readable, per store")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


if __name__ == "__main__":
    sys.exit(main())
