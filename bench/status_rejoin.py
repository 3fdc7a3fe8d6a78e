"""device-status through a rebalance: a second instance joins, then leaves.

One instance reads ``--devices`` readings (one per device, 3 partitions) into its table. A
second instance then joins: the first keeps some partitions and restores nothing, the
second restores the partitions it takes. Then the second stops: the first takes its
partitions back and restores them. For each step it reports how long the first instance
took to be ready again (from the step to its next ``table.restored`` log line and a 200 on
``/readyz``) and the changelog records it applied (``fluxgate_status_changelog_applied_total``).

Not in ``make bench``: it measures one behaviour (the table's store, ``store.py``), and its
baseline is the code before that store (faust's memory store), which a run cannot switch to.
Results: stdout and ``bench-results/status_rejoin.json``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _common import stack_up, write_results
from _readings import Readings, produce_input
from confluent_kafka.schema_registry import SchemaRegistryClient
from fluxgate_testing import ServiceProcess, free_port, unique_topic

APPLIED = "fluxgate_status_changelog_applied_total"
ARGV = [str(Path(sys.executable).with_name("fluxgate-device-status"))]


def instance(endpoints: Any, topics: tuple[str, str], app_id: str, data_dir: Path) -> ServiceProcess:
    port = free_port()
    settings = {
        "KAFKA__BOOTSTRAP_SERVERS": endpoints.bootstrap,
        "REGISTRY__URL": endpoints.registry_url,
        "HTTP__HOST": "127.0.0.1",
        "HTTP__PORT": str(port),
        "STATUS__APP_ID": app_id,
        "STATUS__INPUT_TOPIC": topics[0],
        "STATUS__STATUS_TOPIC": topics[1],
        "STATUS__SILENCE_THRESHOLD_S": "36000",  # nobody turns OFFLINE: the table holds one write a device
        "STATUS__DATA_DIR": str(data_dir / str(port)),
    }
    env = {f"FLUXGATE_STATUS_{key}": value for key, value in settings.items()}
    return ServiceProcess(ARGV, env, health_port=port, isolate_prefix="FLUXGATE_STATUS_")


def metric(service: ServiceProcess, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+]+)$", service.metrics(), re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def restores(service: ServiceProcess) -> int:
    return service.log_text().count("event=table.restored")


def step(first: ServiceProcess, what: str, act: Any) -> dict[str, float]:
    """``act``, then how long ``first`` took to restore and be ready, and what it applied."""
    before, applied = restores(first), metric(first, APPLIED)
    started = time.monotonic()
    act()
    first.wait_until(lambda: restores(first) > before and first.ready(), what, 1800)
    result = {"seconds": round(time.monotonic() - started, 1), "applied": metric(first, APPLIED) - applied}
    print(f"{what}: {result['seconds']} s, {result['applied']:.0f} changelog records applied", flush=True)
    return result


def fleet_input(devices: int) -> tuple[Any, tuple[str, str]]:
    """The stack's Kafka and registry, and new input and status topics (3 partitions each), the
    input holding one reading of each of ``devices`` devices."""
    endpoints = stack_up(["kafka", "registry"])
    topics = (
        unique_topic("sensors.readings", endpoints.bootstrap, partitions=3),
        unique_topic("devices.status", endpoints.bootstrap, partitions=3),
    )
    registry = SchemaRegistryClient({"url": endpoints.registry_url})
    produce_input(endpoints.bootstrap, registry, topics[0], Readings(devices, devices, 60_000))
    return endpoints, topics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=300_000, help="devices in the table, one reading each")
    args = parser.parse_args()
    endpoints, topics = fleet_input(args.devices)
    app_id, data_dir = f"status-rejoin-{uuid.uuid4().hex[:6]}", Path("bench-results/status_rejoin")
    first = instance(endpoints, topics, app_id, data_dir)
    second = instance(endpoints, topics, app_id, data_dir)
    first.start(timeout=600)
    started = time.monotonic()
    first.wait_until(lambda: metric(first, "fluxgate_status_readings_total") >= args.devices, "every reading", 3600)
    filled = round(time.monotonic() - started, 1)
    print(f"the first instance applied {args.devices} readings in {filled} s", flush=True)
    joined = step(first, "a second instance joins: the first ready again", lambda: second.start(wait_ready=False))
    second.wait_until(second.ready, "the second ready", 1800)
    taken = metric(second, APPLIED)
    left = step(first, "the second leaves: the first ready again", second.terminate)
    first.terminate()
    write_results(
        "status_rejoin",
        {"devices": args.devices, "filled_s": filled, "joined": joined, "second_applied": taken, "left": left},
    )


if __name__ == "__main__":
    main()
