"""Simulated CoAP devices for ``coap_ingest.py``: one UDP endpoint per device, notifying at a rate.

Run as a process (``python bench/_coap_devices.py --devices 25 --rate 250 --status FILE``).
Every device gets its own ``CoapDeviceServer`` (the simulator's, on a free port) with one
observable resource: RFC 7252's message ids are per endpoint pair, so devices behind one
socket would share one pair's budget of about 250 messages/s. Writes the resources
(coap-ingest's ``FLUXGATE_COAP_RESOURCES``) to ``--resources``, then every 0.2 s the total of
readings published so far to ``--status``, until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from pathlib import Path

from fluxgate_sim.coap import CoapDeviceServer
from fluxgate_sim.encoding import json_object
from fluxgate_sim.faults import Reading

METRIC = "temperature"
FIRST_TIMESTAMP_MS = 1_486_997_194_029
BACKLOG_S = 0.1
YIELDS = 3  # event-loop turns after a round: the trigger, the rendering, the send


async def serve(args: argparse.Namespace) -> None:
    servers = [CoapDeviceServer(port=0) for _ in range(args.devices)]
    names = [f"{args.prefix}-{index:04d}" for index in range(args.devices)]
    for server, name in zip(servers, names, strict=True):
        server.add_device(name, [METRIC])
        await server.start()
    published = 0

    def publish(server: CoapDeviceServer, name: str) -> None:
        nonlocal published
        reading = Reading(name, METRIC, 20.0 + published % 100 / 10, FIRST_TIMESTAMP_MS + published, published)
        server.publish(name, METRIC, json_object(reading))
        published += 1

    for server, name in zip(servers, names, strict=True):
        publish(server, name)  # a first state, so a registration gets 2.05 instead of 5.03
    resources = [entry for server in servers for entry in server.resources_config()]
    write_atomically(Path(args.resources), json.dumps(resources))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    started, ticks, last_status = time.monotonic(), 0, 0.0
    while not stop.is_set():
        now = time.monotonic()
        due = int((now - started) * args.rate) if args.rate else ticks + 1  # 0: flat out
        if due > ticks:
            # One reading per device, then let the observations render it: aiocoap keeps only
            # the latest trigger of an observation (observe is lossy), so a second reading
            # published before the first went out would replace it, not follow it.
            for server, name in zip(servers, names, strict=True):
                publish(server, name)
            # Catch up after a late wake-up, but forget more than 0.1 s of backlog: a simulator
            # that cannot keep up shows it as a lower rate, not as one long burst.
            ticks = max(ticks + 1, due - int(args.rate * BACKLOG_S))
            for _ in range(YIELDS):
                await asyncio.sleep(0)
        else:
            await asyncio.sleep(max(0.0, (ticks + 1) / args.rate - (now - started)))  # rate > 0 here
        if now - last_status >= 0.2:
            write_atomically(Path(args.status), json.dumps({"published": published, "at": time.time()}))
            last_status = now
    for server in servers:
        await server.stop()


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_suffix(".part")
    partial.write_text(text)
    os.replace(partial, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True, help="readings per device per second (0: flat out)")
    parser.add_argument("--prefix", default="coap-bench")
    parser.add_argument("--resources", required=True)
    parser.add_argument("--status", required=True)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
