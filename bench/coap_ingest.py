"""CoAP-to-Kafka throughput of coap-ingest next to a plain aiocoap observer, measured in one run.

Both legs observe the same resources: ``--devices`` simulated devices (``_coap_devices.py``:
plain asyncio CoAP endpoints, one UDP endpoint per device, one observable resource
each), every one notifying ``--rate`` times a second, in a process of their own started fresh
for each leg:

* baseline: ``_coap_observer.py``, a plain aiocoap client that observes them and only counts;
* coap-ingest: the real ``fluxgate-coap-ingest`` process turns every notification into an Avro
  SensorReading in a fresh Kafka topic; counted by the topic's end offsets (nothing decoded).

After every observation is registered and ``--warm-up`` seconds passed, each leg counts what
arrived over ``--seconds`` and reads the CPU of the observer or the service, the simulator and
Kafka from /proc. Results: ``bench-results/coap_ingest.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ROOT, LegResult, cpu_seconds, micros_per, print_table, server_pid, stack_up, write_report
from confluent_kafka import Consumer, TopicPartition
from fluxgate_testing import ServiceProcess, free_port, unique_topic

from fluxgate_stack import Endpoints

BENCH = Path(__file__).resolve().parent
INGEST = Path(sys.executable).with_name("fluxgate-coap-ingest")
PARTITIONS = 3
PAIR_GOAL, PROCESS_GOAL = 200.0, 5000.0  # notifications/s per device pair and per process (issue 10)
BASELINE, SERVICE = "aiocoap observer", "coap-ingest"


@dataclass(frozen=True)
class Sample:
    """What had arrived, been published and been spent at one instant."""

    at: float
    counts: tuple[int, ...]  # notifications so far per resource, or one total
    received: int  # notifications the client received (coap-ingest's counter; the counts otherwise)
    published: int
    client_cpu: float
    simulator_cpu: float
    kafka_cpu: float


@dataclass(frozen=True)
class Leg:
    name: str
    devices: int
    first: Sample
    last: Sample
    dead_letters: int = 0

    @property
    def seconds(self) -> float:
        return self.last.at - self.first.at

    @property
    def notifications(self) -> int:
        return sum(self.last.counts) - sum(self.first.counts)

    @property
    def slowest_pair(self) -> float:
        """Notifications/s of the slowest resource; -1 when only a total was counted."""
        if len(self.last.counts) != self.devices:
            return -1.0
        return min(b - a for a, b in zip(self.first.counts, self.last.counts, strict=True)) / self.seconds

    @property
    def per_second(self) -> float:
        return self.notifications / self.seconds

    def micros(self, field: str) -> float:
        return micros_per(getattr(self.last, field) - getattr(self.first, field), self.notifications)

    def result(self) -> LegResult:
        published = self.last.published - self.first.published
        extra = {
            "per_device_pair": round(self.per_second / self.devices, 1),
            "received_per_second": round((self.last.received - self.first.received) / self.seconds),
            "slowest_pair": round(self.slowest_pair, 1),
            "published_per_second": round(published / self.seconds),
            "simulator_us": self.micros("simulator_cpu"),
            "kafka_us": self.micros("kafka_cpu"),
            "notifications": self.notifications,
            "seconds": round(self.seconds, 2),
            "dead_letters": self.dead_letters,
        }
        return LegResult("", self.name, self.per_second, self.micros("client_cpu"), extra)


class Simulator:
    """``_coap_devices.py`` as a process: the resources it serves and how much it published."""

    def __init__(self, work: Path, args: argparse.Namespace) -> None:
        self.resources_path, self.status_path = work / "resources.json", work / "simulator.json"
        for path in (self.resources_path, self.status_path):
            path.unlink(missing_ok=True)
        command = [sys.executable, str(BENCH / "_coap_devices.py"), "--devices", str(args.devices)]
        command += ["--rate", str(args.rate), "--resources", str(self.resources_path)]
        command += ["--status", str(self.status_path)]
        self.process = subprocess.Popen(command)
        wait_for(self.resources_path.exists, "the simulated devices", self.process)
        self.resources: list[dict[str, str]] = json.loads(self.resources_path.read_text())

    def published(self) -> int:
        return int(read_json(self.status_path).get("published", 0))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def read_json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def wait_for(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise SystemExit(f"{process.args!r} exited with {process.returncode} waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def measure(
    name: str,
    simulator: Simulator,
    client_pid: int,
    counts: Callable[[], tuple[int, ...]],
    args: argparse.Namespace,
    received: Callable[[], int] | None = None,
) -> tuple[Sample, Sample]:
    kafka = server_pid("kafka")

    def sample() -> Sample:
        at = time.perf_counter()
        cpus = (cpu_seconds(client_pid), cpu_seconds(simulator.process.pid), cpu_seconds(kafka))
        arrived = counts()
        return Sample(at, arrived, received() if received else sum(arrived), simulator.published(), *cpus)

    time.sleep(args.warm_up)
    first = sample()
    print(f"{name}: measuring {args.seconds:.0f}s")
    time.sleep(args.seconds)
    return first, sample()


def run_baseline(work: Path, args: argparse.Namespace) -> Leg:
    simulator = Simulator(work, args)
    status = work / "observer.json"
    command = [sys.executable, str(BENCH / "_coap_observer.py"), str(simulator.resources_path), str(status)]
    observer = subprocess.Popen(command)

    def counts() -> tuple[int, ...]:
        # Written every 0.2 s by the observer: a count may be up to 0.2 s old at either end.
        return tuple(int(count) for count in read_json(status).get("counts", []))

    try:
        wait_for(lambda: read_json(status).get("registered") == args.devices, "the observations", observer)
        first, last = measure(BASELINE, simulator, observer.pid, counts, args)
    finally:
        observer.terminate()
        observer.wait(30)
        simulator.stop()
    return Leg(BASELINE, args.devices, first, last)


def end_offsets(consumer: Consumer, topic: str, partitions_count: int = PARTITIONS) -> int:
    partitions = [TopicPartition(topic, partition) for partition in range(partitions_count)]
    return sum(consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in partitions)


def run_service(work: Path, endpoints: Endpoints, args: argparse.Namespace) -> Leg:
    simulator = Simulator(work, args)
    topic = unique_topic("bench.coap.readings", endpoints.bootstrap, PARTITIONS)
    dead_letters = unique_topic("bench.coap.dlq", endpoints.bootstrap, 1)
    health_port = free_port()
    env = {
        "FLUXGATE_COAP_RESOURCES": json.dumps([{"topic": topic, **entry} for entry in simulator.resources]),
        "FLUXGATE_COAP_DEADLETTER_TOPIC": dead_letters,
        "FLUXGATE_COAP_KAFKA__BOOTSTRAP_SERVERS": endpoints.bootstrap,
        "FLUXGATE_COAP_REGISTRY__URL": endpoints.registry_url,
        "FLUXGATE_COAP_HTTP__HOST": "127.0.0.1",
        "FLUXGATE_COAP_HTTP__PORT": str(health_port),
        "FLUXGATE_COAP_READINESS": "all",
        **{f"FLUXGATE_COAP_{key}": value for key, value in (s.split("=", 1) for s in args.service_setting)},
    }
    log = ROOT / "bench-results" / "coap-ingest.log"
    log.parent.mkdir(exist_ok=True)
    log.unlink(missing_ok=True)
    service = ServiceProcess([str(INGEST)], env, health_port=health_port, log_path=log, isolate_prefix="FLUXGATE_COAP_")
    consumer = Consumer({"bootstrap.servers": endpoints.bootstrap, "group.id": "bench-coap-offsets"})
    try:
        service.start(wait_ready=True, timeout=60)
        assert service.process is not None
        notified = lambda: int(service.metric("fluxgate_coap_notifications_total"))  # noqa: E731
        records = lambda: (end_offsets(consumer, topic),)  # noqa: E731
        first, last = measure(SERVICE, simulator, service.process.pid, records, args, notified)
        if not service.running:
            raise SystemExit(f"coap-ingest exited during the leg; see {log}")
        dead = end_offsets(consumer, dead_letters, 1)
        duplicates = service.metric("fluxgate_coap_duplicates_dropped_total")
        if duplicates:
            print(f"note: coap-ingest dropped {duplicates:.0f} notifications as duplicates")
    finally:
        consumer.close()
        service.terminate()
        simulator.stop()
    return Leg(SERVICE, args.devices, first, last, dead)


# --- report ------------------------------------------------------------------------------------


def ratios(baseline: Leg, service: Leg) -> dict[str, float]:
    cpu_base, cpu_service = baseline.micros("client_cpu"), service.micros("client_cpu")
    return {
        "throughput_service_over_baseline": service.per_second / baseline.per_second,
        "cpu_per_notification_service_over_baseline": cpu_service / cpu_base if cpu_base else 0.0,
    }


def goals(legs: list[Leg]) -> dict[str, bool]:
    found = {}
    for leg in legs:
        key = leg.name.replace(" ", "_").replace("-", "_")
        found[f"{key}_pair_goal_met"] = leg.per_second / leg.devices >= PAIR_GOAL
        found[f"{key}_process_goal_met"] = leg.per_second >= PROCESS_GOAL
    return found


def report(legs: list[Leg], args: argparse.Namespace) -> None:
    header = ["leg", "notif/s", "per pair", "slowest pair", "received/s", "published/s", "µs CPU/notif"]
    header += ["simulator µs", "kafka µs"]
    rows = [
        [
            *(leg.name, leg.per_second, leg.per_second / leg.devices, leg.slowest_pair),
            *(leg.result().extra["received_per_second"], leg.result().extra["published_per_second"]),
            leg.micros("client_cpu"),
            *(leg.micros("simulator_cpu"), leg.micros("kafka_cpu")),
        ]
        for leg in legs
    ]
    print_table(f"CoAP observe: {args.devices} devices at {args.rate:g} notifications/s each", header, rows)
    found = ratios(*legs) if len(legs) == 2 else {}
    met = goals(legs)
    for key, value in {**found, **met}.items():
        print(f"{key}: {value:.2f}" if isinstance(value, float) else f"{key}: {value}")
    settings = {"devices": args.devices, "rate_per_device": args.rate, "seconds": args.seconds}
    settings |= {"warm_up": args.warm_up, "service_settings": " ".join(args.service_setting) or "defaults"}
    settings |= {"goals": f">= {PAIR_GOAL:g}/s per pair, >= {PROCESS_GOAL:g}/s per process"}
    settings |= {f"goal {key}": value for key, value in met.items()}
    title = "CoAP -> Kafka: coap-ingest against a plain aiocoap observer"
    paths = write_report("coap_ingest", title, "notification", [leg.result() for leg in legs], found, settings)
    print("written to " + ", ".join(str(path) for path in paths))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=25, help="simulated devices, one resource each (default 25)")
    parser.add_argument("--rate", type=float, default=250.0, help="notifications/s per device (0: flat out)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per leg (default 20)")
    parser.add_argument("--warm-up", type=float, default=3.0, help="unmeasured seconds after registering")
    parser.add_argument("--legs", nargs="+", choices=("baseline", "service"), default=["baseline", "service"])
    parser.add_argument(
        "--service-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a coap-ingest setting without its FLUXGATE_COAP_ prefix, e.g. KAFKA__LINGER_MS=2 (repeatable)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    endpoints = stack_up(("kafka", "registry"))  # not Mosquitto
    legs: list[Leg] = []
    with tempfile.TemporaryDirectory(prefix="fluxgate-bench-coap-") as tmp:
        if "baseline" in args.legs:
            legs.append(run_baseline(Path(tmp), args))
        if "service" in args.legs:
            legs.append(run_service(Path(tmp), endpoints, args))
    report(legs, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
