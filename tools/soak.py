"""`make soak`: the whole pipeline under faults, then every store checked against what the devices sent.

A soak run is a pipeline of its own beside anything else on the stack: its topics, consumer
groups, MQTT topics, devices and store targets carry the run's prefix, so it shares the
servers and nothing else. It runs simulated MQTT and CoAP fleets (with duplicate, late,
out-of-order and malformed readings; with ``--fleet-devices`` also a ``fluxgate-sim fleet``
reporting every ``--fleet-period`` seconds) through every service into every store, while a
seeded fault schedule hits one part at a time:

- ``kill``: SIGKILL, down for ``--kill-down`` seconds, started again (a server on its data,
  a service with its settings);
- ``stop``: SIGSTOP for ``--stop-for`` seconds (longer than the session and keep-alive
  timeouts), then SIGCONT.

After each fault it waits until the pipeline is whole again (new readings on the readings
topic and a new aggregate in every store, all after the fault ended) and notes how long
that took. At the end it stops the devices, waits until their last windows can close and
sends one reading to move the gateways' clock past them, drains every stage, and hands the simulator's ledger to
``soak_check`` (which shares no code with the services). The report (JSON, Markdown and a
chart of each stage's throughput with the faults marked) lands in ``bench-results/``; the
exit code says whether the check passed. The schedule and its seed are printed first:
``--seed`` replays a run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fluxgate_testing import free_port
from pipeline_stores import Stores
from prefixed_run import (
    SERVERS,
    SERVICES,
    closing_wait,
    prepare,
    push_watermark,
    run_names,
    seconds,
    settle,
    wait_ready,
    whole,
)
from run_pipeline import (
    BIN,
    Names,
    Offsets,
    Pipeline,
    device_prefix,
    start_all,
    start_console,
    stop_upstream_first,
    take_interrupts,
)
from soak_check import Check, FaultWindow, check, save
from soak_report import write_report

from fluxgate_stack import api as stack

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("kill", "stop")


@dataclass(frozen=True)
class Fault:
    target: str
    kind: str
    hold: float  # seconds down (kill) or stopped (stop)


def schedule(
    seed: int, targets: list[str], kinds: list[str], count: int, kill_down: float, stop_for: float
) -> list[Fault]:
    """``count`` faults: every (target, kind) pair once in a seeded order, then again."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    while len(faults) < count:
        pairs = [(target, kind) for target in targets for kind in kinds]
        rng.shuffle(pairs)
        faults += [Fault(t, k, kill_down if k == "kill" else stop_for) for t, k in pairs]
    return faults[:count]


@dataclass
class Timeline:
    """Every ``every`` seconds: records per topic and per store, as the chart draws them."""

    names: Names
    bootstrap: str
    stores: Stores
    samples: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self, started: float, every: float = 2.0) -> threading.Thread:
        def loop() -> None:
            with Offsets(self.bootstrap) as offsets:
                while not self._stop.wait(every):
                    sample: dict[str, Any] = {"t": round(time.monotonic() - started, 1)}
                    with contextlib.suppress(Exception):  # Kafka down is a fault being measured, not an error
                        for topic in ("sensors.readings", "temperatures.aggregated", "sensors.deadletter"):
                            sample[topic] = sum(offsets.ends(self.names.topic(topic)).values())
                    sample |= self.stores.counts()
                    self.samples.append(sample)

        thread = threading.Thread(target=loop, name="timeline", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def latest(self) -> dict[str, Any]:
        return self.samples[-1] if self.samples else {}


WHOLE = ("sensors.readings", "temperatures.aggregated", "elasticsearch", "scylla", "hazelcast")


def wait_whole(timeline: Timeline, since: float, started: float, timeout: float) -> float | None:
    """Seconds from ``since`` until every stage gained records after it; None if not within ``timeout``."""
    base: dict[str, Any] | None = None
    while time.monotonic() - since < timeout:
        time.sleep(1)
        fresh = samples_since(timeline, since, started)
        if not fresh:
            continue
        base = base or fresh[0]
        now = fresh[-1]
        if not stalled(base, now):
            return round(now["t"] - (since - started), 1)
    return None


def samples_since(timeline: Timeline, since: float, started: float) -> list[dict[str, Any]]:
    """The timeline's samples taken at or after the monotonic time ``since`` (the run began at ``started``)."""
    return [sample for sample in timeline.samples if sample["t"] >= since - started]


def stalled(base: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The stages that gained no records from sample ``base`` to sample ``now``."""
    return [key for key in WHOLE if now.get(key, 0) <= base.get(key, 0)]


def why_not_whole(timeline: Timeline, since: float, started: float, pipeline: Pipeline) -> str:
    """What the run says when a fault's recovery timed out: the stages that did not move, and
    the services that are not running (one that exited on its own is a bug to find)."""
    fresh = samples_since(timeline, since, started)
    still = stalled(fresh[0], fresh[-1]) if fresh else list(WHOLE)
    return f"no new records in {', '.join(still)}; services not running: {', '.join(pipeline.dead()) or 'none'}"


class Faulter:
    """Applies a fault to a server of the stack or a service of the pipeline."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def pid(self, target: str) -> int:
        if target in SERVICES:
            return self.pipeline.process(target).pid
        (status,) = [s for s in stack.Stack().status() if s.name == target]
        if status.pid is None:
            raise RuntimeError(f"{target} is not running")
        return status.pid

    def signal_group(self, target: str, signum: int) -> None:
        launcher = self.pipeline.launcher
        if launcher is not None and launcher.handles(target):
            # The service runs in a container, not under the podman process: the engine
            # freezes (every process of it, a JVM's too) or kills the container itself.
            launcher.signal(target, signum)
            return
        # Services and servers each lead a session of their own: a JVM's children go with it.
        os.killpg(self.pid(target), signum)

    def inject(self, fault: Fault) -> None:
        if fault.kind == "stop":
            self.signal_group(fault.target, signal.SIGSTOP)
        elif fault.target in SERVICES:
            self.signal_group(fault.target, signal.SIGKILL)
            self.pipeline.process(fault.target).wait()
        else:
            stack.kill(fault.target)

    def release(self, fault: Fault) -> None:
        if fault.kind == "stop":
            self.signal_group(fault.target, signal.SIGCONT)
        elif fault.target in SERVICES:
            self.pipeline.restart(fault.target)
        else:
            stack.start(fault.target)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faults", type=int, default=26, help="how many faults, one after another")
    parser.add_argument("--targets", default=",".join(SERVERS + SERVICES), help="comma-separated servers and services")
    parser.add_argument("--kinds", default=",".join(KINDS), help="kill, stop or both")
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (printed; replays a run)")
    parser.add_argument("--plan", default=None, help="the faults in order instead, e.g. kill:aggregator,stop:kafka")
    parser.add_argument("--kill-down", type=float, default=5.0, help="seconds a killed part stays down")
    parser.add_argument("--stop-for", type=float, default=60.0, help="seconds a stopped part stays stopped")
    parser.add_argument("--calm", type=float, default=10.0, help="seconds between a recovery and the next fault")
    parser.add_argument("--recover-timeout", type=float, default=180.0, help="give up waiting for whole after this")
    parser.add_argument("--mqtt-devices", type=int, default=20)
    parser.add_argument("--coap-devices", type=int, default=5)
    parser.add_argument("--rate", type=float, default=1.0, help="readings per device per second per metric")
    parser.add_argument("--fleet-devices", type=int, default=0, help="a fleet beside them (fluxgate-sim fleet)")
    parser.add_argument("--fleet-period", type=float, default=60.0, help="seconds between a fleet device's reports")
    parser.add_argument("--fleet-connections", type=int, default=4, help="the fleet's MQTT connections (hubs)")
    parser.add_argument("--malformed", type=float, default=0.02)
    parser.add_argument("--late", type=float, default=0.01)
    parser.add_argument("--late-by", type=float, default=120.0, help="seconds behind a late reading is")
    parser.add_argument("--window", default="10 seconds")
    parser.add_argument("--watermark", default="10 seconds")
    parser.add_argument("--report", type=Path, default=ROOT / "bench-results", help="folder of the run's report")
    parser.add_argument("--checkpoints", type=Path, default=None, help="the aggregator's (default: in the report)")
    parser.add_argument("--spark-master", default=None, help="run the aggregator as the driver of this Spark cluster")
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE",
        help="a Spark property for the aggregator on --spark-master (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--containers", action="store_true",
        help="run the services from their images (make images), as the charts' pods run them",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    planned = [step.split(":", 1)[::-1] for step in args.plan.split(",")] if args.plan else []
    if any(len(step) != 2 for step in planned):
        parser.error(f"--plan takes kind:target steps, got {args.plan!r}")
    unknown = set(args.targets.split(",") + [t for t, _ in planned]) - set(SERVERS + SERVICES)
    kinds = set(args.kinds.split(",") + [k for _, k in planned]) - set(KINDS)
    if unknown or kinds:
        parser.error(f"unknown targets or kinds: {', '.join(sorted(unknown | kinds))}")
    args.planned = [(target, kind) for target, kind in planned]
    if any("=" not in pair for pair in args.spark_conf):
        parser.error(f"--spark-conf takes KEY=VALUE, got {args.spark_conf!r}")
    # On a cluster the executors connect back to the driver: on loopback, it must say so.
    args.spark_conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        **dict(pair.split("=", 1) for pair in args.spark_conf),
    }
    return whole(args)


@dataclass
class Run:
    """What the report says: the schedule, each fault's window and recovery, the check."""

    seed: int
    prefix: str
    faults: list[dict[str, Any]] = field(default_factory=list)
    warmup_s: float | None = None
    drained: dict[str, str] = field(default_factory=dict)
    exits: dict[str, int] = field(default_factory=dict)
    unhealthy: dict[str, str] = field(default_factory=dict)  # containers whose image's health check failed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    take_interrupts()  # a Ctrl-C still stops every child it started
    names = run_names("soak")
    prefix = names.prefix
    plan = [Fault(t, k, args.kill_down if k == "kill" else args.stop_for) for t, k in args.planned] or schedule(
        args.seed, args.targets.split(","), args.kinds.split(","), args.faults, args.kill_down, args.stop_for
    )
    print(json.dumps({"seed": args.seed, "prefix": prefix, "schedule": [asdict(f) for f in plan]}), flush=True)
    folder = args.report / f"soak-{prefix.rstrip('-')}"
    endpoints, pipeline, stores, ports = prepare(names, folder, args, containers=args.containers)
    ledger = folder / "ledger.jsonl"
    launcher = pipeline.launcher
    run = Run(args.seed, prefix)
    started = time.monotonic()
    timeline = Timeline(names, endpoints.bootstrap, stores)
    windows: list[FaultWindow] = []
    whole_from_ms = 0
    try:
        gateway_ready = functools.partial(wait_ready, ports["mqtt-proxy"], args.recover_timeout)
        start_all(pipeline, args, names, ("--ledger", str(ledger)), ports, gateway_ready)
        if args.fleet_devices:
            pipeline.start("fleet", fleet_argv(args, names, folder / "fleet-ledger.jsonl"))
        if launcher is not None:  # the console's image too, beside the pipeline it watches
            start_console(pipeline, free_port(), names, health_port=free_port())
        timeline.run(started)
        run.warmup_s = wait_whole(timeline, started, started, args.recover_timeout)
        whole_from_ms = int(time.time() * 1000)
        print(f"whole after {run.warmup_s} s; faults begin", flush=True)
        if launcher is not None:
            run.unhealthy = launcher.unhealthy()
            print(f"health checks of the images: {run.unhealthy or 'all pass'}", flush=True)
        faulter = Faulter(pipeline)
        for fault in plan:
            windows.append(apply(fault, faulter, timeline, started, args, run))
            time.sleep(args.calm)
        pipeline.stop("simulator", "fleet")
        push_watermark("127.0.0.1", 1883, names, f"{prefix}watermark", closing_wait(args))
        settle(endpoints.bootstrap, names)
    finally:
        stopped = stop_upstream_first(pipeline, endpoints.bootstrap, names=names)
        timeline.stop()
        if launcher is not None:
            launcher.remove_all()
    run.drained, run.exits = stopped.waits, stopped.exits
    append_ledger(ledger, folder / "fleet-ledger.jsonl")
    spec = Check(ledger, endpoints, names.prefix, names.es_alias, names.store_target, windows,
                         window_ms=seconds(args.window) * 1000, excluded=f"{prefix}watermark",
                         whole_from_ms=whole_from_ms, watermark_ms=seconds(args.watermark) * 1000)  # fmt: skip
    save(spec, folder / "check.json")
    result = check(spec)
    stores.close()
    path = write_report(folder, args, run, result, timeline.samples)
    print(json.dumps({"report": str(path), "passed": result.passed, "problems": result.problems[:20]}), flush=True)
    return 0 if result.passed and not any(stopped.exits.values()) and not run.unhealthy else 1


def apply(
    fault: Fault, faulter: Faulter, timeline: Timeline, started: float, args: argparse.Namespace, run: Run
) -> FaultWindow:
    begin = time.monotonic()
    print(f"[{begin - started:6.0f}s] {fault.kind} {fault.target} for {fault.hold:.0f} s", flush=True)
    faulter.inject(fault)
    time.sleep(fault.hold)
    faulter.release(fault)
    end = time.monotonic()
    recovered = wait_whole(timeline, end, started, args.recover_timeout)
    print(f"[{time.monotonic() - started:6.0f}s] {fault.target} released; whole again after {recovered} s", flush=True)
    if recovered is None:
        print(f"    not whole: {why_not_whole(timeline, end, started, faulter.pipeline)}", flush=True)
    wall = time.time() - (time.monotonic() - begin)
    window = FaultWindow(fault.target, fault.kind, int(wall * 1000), int((wall + (end - begin)) * 1000),
                         int((wall + (end - begin) + (recovered or args.recover_timeout)) * 1000))  # fmt: skip
    run.faults.append({**asdict(fault), "at_s": round(begin - started, 1), "whole_after_s": recovered})
    return window


def fleet_argv(args: argparse.Namespace, names: Names, ledger: Path) -> list[str]:
    """``fluxgate-sim fleet`` with the soak's faults, under the run's names, until stopped.
    It writes a ledger of its own: two writers of one file could interleave a line."""
    return [str(BIN / "fluxgate-sim"), "fleet", "--devices", str(args.fleet_devices),
            "--period", str(args.fleet_period), "--mqtt-connections", str(args.fleet_connections),
            "--malformed", str(args.malformed), "--late", str(args.late), "--late-by-s", str(args.late_by),
            "--out-of-order", "0.05", "--duplicates", "0.01", "--seed", str(args.seed),
            "--mqtt-root", names.mqtt_root, *device_prefix(names), "--ledger", str(ledger)]  # fmt: skip


def append_ledger(ledger: Path, other: Path) -> None:
    """The fleet's ledger after the devices', once both have stopped: soak_check reads one."""
    if other.exists():
        with ledger.open("a", encoding="utf-8") as into, other.open(encoding="utf-8") as lines:
            into.writelines(lines)


if __name__ == "__main__":
    sys.exit(main())
