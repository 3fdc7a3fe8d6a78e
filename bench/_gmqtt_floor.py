"""The gmqtt floor: a plain gmqtt client that receives and acknowledges, and nothing else.

Run by ``mqtt_proxy.py`` as its own process (so its CPU is its own): subscribes, prints
``ready``, counts messages until ``count`` arrived (or none came for ``--idle`` seconds,
which QoS 0 allows), then prints ``received=<n> idle_s=<s>`` and exits. gmqtt acknowledges
each message as it parses it (``optimistic_acknowledgement``), and ``on_message`` is a plain
function: the least a gmqtt-based proxy can do per message.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from gmqtt import Client, Subscription


async def receive(args: argparse.Namespace) -> tuple[int, float]:
    done = asyncio.Event()
    subscribed = asyncio.Event()
    received = 0
    last = time.monotonic()

    def on_message(client: Any, topic: str, payload: bytes, qos: int, properties: Any) -> int:
        nonlocal received, last
        received += 1
        last = time.monotonic()
        if received >= args.count:
            done.set()
        return 0

    client = Client(args.client_id, receive_maximum=args.receive_maximum, optimistic_acknowledgement=True)
    client.on_message = on_message
    client.on_subscribe = lambda *_: subscribed.set()
    await client.connect(args.host, args.port)
    client.subscribe(Subscription(args.topic, qos=args.qos))
    await subscribed.wait()
    print("ready", flush=True)
    while not done.is_set():
        try:
            await asyncio.wait_for(done.wait(), 0.2)
        except TimeoutError:
            if received and time.monotonic() - last > args.idle:
                break
    idle = max(time.monotonic() - last, 0.0) if received < args.count else 0.0
    await client.disconnect()
    return received, idle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("host", "topic", "client_id"):
        parser.add_argument(f"--{name.replace('_', '-')}", required=True)
    for name in ("port", "qos", "count", "receive_maximum"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, required=True)
    parser.add_argument("--idle", type=float, default=3.0, help="stop after this long without a message")
    received, idle = asyncio.run(receive(parser.parse_args()))
    print(f"received={received} idle_s={idle:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
