"""A pipeline of its own beside anything else on the stack, as a soak run (``tools/soak.py``),
``bench/pipeline.py`` and ``bench/fleet.py`` start one: its topics, consumer groups, MQTT
topics, devices and store targets carry the run's prefix (``run_pipeline.Names``), so it
shares the stack's servers and nothing else.

:func:`prepare` readies what such a run stands on: the servers, the run's topics, its folder,
its ``run_pipeline.Pipeline``, the stores it is read from and free ports; then
``run_pipeline.start_all`` starts the services, and :func:`wait_ready` waits for one. At the
end :func:`push_watermark` closes the devices' last windows and :func:`settle` waits until the
aggregator has written them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

from containers import ContainerLauncher
from fluxgate_testing import free_port
from pipeline_stores import Stores
from run_pipeline import PERSISTERS, Names, Offsets, Pipeline

from fluxgate_stack import Endpoints
from fluxgate_stack import api as stack
from fluxgate_stack.topics import create_topics

SERVERS = ("kafka", "registry", "mosquitto", "elasticsearch", "cassandra", "hazelcast")
SERVICES = ("mqtt-proxy", "coap-ingest", "aggregator", *PERSISTERS, "device-status")
TOPICS = ("sensors.readings", "sensors.deadletter", "temperatures.aggregated", "temperatures.late",
          "persisters.deadletter", "devices.status")  # fmt: skip


def run_names(kind: str) -> Names:
    """A new run's names: ``kind`` and the time (month to second) as their prefix."""
    return Names(f"{kind}{time.strftime('%m%d%H%M%S')}-")


def whole(args: argparse.Namespace) -> argparse.Namespace:
    """What ``run_pipeline.start_all`` reads beside a script's own options: every stage runs,
    device-status on a free port."""
    args.no_aggregator = args.no_persisters = False
    args.status_port = free_port()
    return args


class Prepared(NamedTuple):
    endpoints: Endpoints
    pipeline: Pipeline
    stores: Stores  # the targets the run's persisters write
    ports: dict[str, int]  # each service's HTTP port but device-status's (``args.status_port``)


def prepare(names: Names, folder: Path, args: argparse.Namespace, containers: bool = False) -> Prepared:
    """The stack's servers up, the run's topics, its ``folder`` (logs, the aggregator's
    checkpoints unless ``args.checkpoints`` names a folder, the containers' volumes), and free
    ports for the services and the simulated CoAP devices (``args.coap_port``). With
    ``containers`` the services run from their images."""
    endpoints = stack.ensure_up(list(SERVERS))
    create_topics(endpoints.bootstrap, {names.topic(topic): 3 for topic in TOPICS})
    folder.mkdir(parents=True, exist_ok=True)
    args.checkpoints = getattr(args, "checkpoints", None) or folder / "checkpoints"
    launcher = ContainerLauncher(names.prefix.rstrip("-"), folder / "volumes") if containers else None
    pipeline = Pipeline(folder, launcher=launcher)
    stores = Stores(endpoints, names.es_alias, names.scylla_table, names.store_target)
    args.coap_port = free_port(socket.SOCK_DGRAM)
    ports = {name: free_port() for name in SERVICES if name != "device-status"}
    return Prepared(endpoints, pipeline, stores, ports)


def server_pids() -> dict[str, int]:
    """The process of each of the run's servers that is running (a benchmark measures them)."""
    return {status.name: status.pid for status in stack.Stack().status() if status.name in SERVERS and status.pid}


def wait_ready(port: int, timeout: float) -> None:
    """Until a service's ``/readyz`` answers 200: the MQTT gateway has subscribed, so the
    broker keeps what the devices send from then on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as up:
            if up.status == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"the service on port {port} was not ready within {timeout:.0f} s")


def push_watermark(host: str, port: int, names: Names, device: str, wait_s: float) -> None:
    """The devices have stopped; close every window they sent into. A device's windows close
    once the gateways' clock (the newest ingest time of any reading) has passed their end by
    the watermark delay, plus how far in the past its last readings were stamped (decision
    0011): ``wait_s`` covers that. Then one reading stamped now, through the MQTT gateway like
    any other, moves the gateways' clock. (A reading from the future would move only its own
    device's watermark.)"""
    from gmqtt import Client

    time.sleep(wait_s)

    async def publish() -> None:
        client = Client(f"{device}-push")
        await client.connect(host, port)
        payload = {"sensorId": device, "timestamp": int(time.time() * 1000), "temperature": 0.0, "seq": 1}
        client.publish(f"{names.mqtt_root}/{device}/temperature", json.dumps(payload).encode(), qos=1)
        await asyncio.sleep(1)
        await client.disconnect()

    asyncio.run(publish())


def closing_wait(args: argparse.Namespace) -> float:
    """How long after the devices stop their last windows can close: a window, the watermark
    delay, and a micro-batch (a device whose last batch held only a reading stamped in the
    past is held back by that batch's time)."""
    return seconds(args.window) + seconds(args.watermark) + 5


def settle(bootstrap: str, names: Names, quiet: float = 3.0, timeout: float = 120.0) -> None:
    """After the push: the aggregator has read everything and written the windows it closed.
    The batch that reads the push writes every window its clock closes, and the job commits a
    batch's offsets to its group only after the batch (``progress_commits``): once the group
    has caught up, those windows are on the topic. The quiet is for a batch still running."""
    with Offsets(bootstrap) as offsets:
        offsets.caught_up(names.group("aggregator"), names.readings, timeout)
        print(offsets.settled(names.aggregated, timeout, quiet), flush=True)


def seconds(duration: str) -> int:
    """``--window``/``--watermark`` (``10 seconds``, ``1 minute``) in seconds."""
    number, unit = duration.split()
    return int(number) * {"second": 1, "minute": 60}[unit.rstrip("s")]
