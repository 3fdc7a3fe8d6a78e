"""Simulated CoAP devices for ``coap_ingest.py``: one UDP endpoint per device, notifying at a rate.

Run as a process (``python bench/_coap_devices.py --devices 25 --rate 250 --status FILE``).
Every device is its own UDP endpoint with one observable resource, ``/sensors/<device>/temperature``:
RFC 7252's message ids are per endpoint pair, so devices behind one socket would share one
pair's budget of about 250 messages/s. Writes the resources (coap-ingest's
``FLUXGATE_COAP_RESOURCES``) to ``--resources``, then every 0.2 s the total of readings
published so far to ``--status``, until SIGTERM.

The devices speak the little of CoAP an observer needs, on plain asyncio datagram endpoints
rather than through aiocoap's server: aiocoap spent 100 to 400 µs of CPU per notification
here (its resource, observation and message layers), so one simulator process capped the
benchmark at 2,000 to 5,000 notifications/s, below the rate it is meant to measure. What an
observer sees is what aiocoap's server sends (see ``_coap_wire.py``): the registration
answered piggybacked (2.05, Observe, Content-Format 50), then every state as a confirmable
notification, one unacknowledged per endpoint pair (RFC 7252 §4.7 NSTART 1, RFC 7641 §4.5),
retransmitted after ACK_TIMEOUT; a state published while one is unacknowledged replaces the
waiting one (observe is lossy, RFC 7641 §1.3).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import cast

from _coap_wire import ACK, CON, CONTENT, NOT_FOUND, RST, Incoming, encode, parse

from fluxgate_sim.encoding import json_object
from fluxgate_sim.faults import Reading

METRIC = "temperature"
FIRST_TIMESTAMP_MS = 1_486_997_194_029
BACKLOG_S = 0.1
JSON_FORMAT = 50
ACK_TIMEOUT_S, MAX_RETRANSMIT = 2.0, 4  # RFC 7252 §4.8
Address = tuple[str, int]


class Observer:
    """One registration: where notifications go, and the one awaiting its ACK."""

    __slots__ = ("address", "retries", "sent_state", "timer", "token", "unacknowledged")

    def __init__(self, address: Address, token: bytes) -> None:
        self.address = address
        self.token = token
        self.unacknowledged: tuple[int, bytes] | None = None  # (message id, datagram)
        self.retries = 0
        self.sent_state = -1
        self.timer: asyncio.TimerHandle | None = None


class Device(asyncio.DatagramProtocol):
    """One device on its own UDP endpoint; :meth:`publish` makes a new state and notifies."""

    def __init__(self, name: str, counter: list[int], flat_out: bool) -> None:
        self.name = name
        self._flat_out = flat_out  # a new state as soon as the last one is acknowledged
        self.path = ("sensors", name, METRIC)
        self.observers: dict[Address, Observer] = {}
        self._counter = counter  # readings published by every device of the process
        self._state = -1
        self._observe = 1
        self._message_id = random.randrange(0x10000)  # a fresh process must not replay recent ids
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def publish(self) -> None:
        self._state = self._counter[0]
        self._counter[0] += 1
        for observer in self.observers.values():
            if observer.unacknowledged is None:
                self._notify(observer)

    def datagram_received(self, data: bytes, addr: Address) -> None:
        message = parse(data)
        if message is None:
            return
        if message.kind in (ACK, RST) and not message.code:
            self._acknowledged(message, addr)
        elif message.code == 1 and message.kind == CON:  # GET
            self._get(message, addr)

    def _acknowledged(self, message: Incoming, addr: Address) -> None:
        observer = self.observers.get(addr)
        if observer is None or observer.unacknowledged is None or observer.unacknowledged[0] != message.message_id:
            return
        if observer.timer is not None:
            observer.timer.cancel()
        observer.unacknowledged, observer.retries = None, 0
        if message.kind == RST:  # the client forgot the observation (RFC 7641 §3.6)
            del self.observers[addr]
        elif self._flat_out:
            self.publish()
        elif observer.sent_state != self._state:
            self._notify(observer)

    def _get(self, message: Incoming, addr: Address) -> None:
        if message.path != self.path:
            self._send(encode(ACK, NOT_FOUND, message.message_id, message.token), addr)
            return
        if message.observe == 0:
            self._drop(addr)
            self.observers[addr] = Observer(addr, message.token)
        elif message.observe == 1:
            self._drop(addr)
        observe = self._next_observe() if message.observe == 0 else None
        answer = encode(ACK, CONTENT, message.message_id, message.token, observe, JSON_FORMAT, self._payload())
        self._send(answer, addr)
        if self._flat_out and observe is not None:
            self.publish()  # the first notification: every ACK brings the next

    def _notify(self, observer: Observer) -> None:
        observer.sent_state = self._state
        message_id = self._message_id = (self._message_id + 1) & 0xFFFF
        datagram = encode(CON, CONTENT, message_id, observer.token, self._next_observe(), JSON_FORMAT, self._payload())
        observer.unacknowledged = (message_id, datagram)
        self._send(datagram, observer.address)
        observer.timer = asyncio.get_running_loop().call_later(ACK_TIMEOUT_S, self._retransmit, observer)

    def _retransmit(self, observer: Observer) -> None:
        if observer.unacknowledged is None:
            return
        if observer.retries >= MAX_RETRANSMIT:
            self._drop(observer.address)  # the observer is gone (RFC 7641 §4.5)
            return
        observer.retries += 1
        self._send(observer.unacknowledged[1], observer.address)
        delay = ACK_TIMEOUT_S * 2**observer.retries
        observer.timer = asyncio.get_running_loop().call_later(delay, self._retransmit, observer)

    def _drop(self, addr: Address) -> None:
        observer = self.observers.pop(addr, None)
        if observer is not None and observer.timer is not None:
            observer.timer.cancel()

    def _next_observe(self) -> int:
        self._observe = (self._observe + 1) & 0xFFFFFF
        return self._observe

    def _payload(self) -> bytes:
        state = max(self._state, 0)
        reading = Reading(self.name, METRIC, 20.0 + state % 100 / 10, FIRST_TIMESTAMP_MS + state, state)
        return json_object(reading)

    def _send(self, datagram: bytes, addr: Address) -> None:
        assert self._transport is not None
        self._transport.sendto(datagram, addr)


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    published = [0]
    devices: list[Device] = []
    resources = []
    for index in range(args.devices):
        device = Device(f"{args.prefix}-{index:04d}", published, flat_out=not args.rate)
        transport, _ = await loop.create_datagram_endpoint(lambda d=device: d, local_addr=("127.0.0.1", 0))
        port = transport.get_extra_info("sockname")[1]
        device.publish()  # a first state, so a registration gets 2.05 instead of 5.03
        devices.append(device)
        uri = f"coap://127.0.0.1:{port}/sensors/{device.name}/{METRIC}"
        resources.append({"uri": uri, "device_from": "path:1", "metric_from": "path:2"})
    write_atomically(Path(args.resources), json.dumps(resources))
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await publish_until(stop, devices, args.rate, published, Path(args.status))


async def publish_until(
    stop: asyncio.Event, devices: list[Device], rate: float, published: list[int], status: Path
) -> None:
    """One reading per device ``rate`` times a second (0: the devices publish on each ACK)."""
    started, ticks, last_status = time.monotonic(), 0, 0.0
    while not stop.is_set():
        now = time.monotonic()
        due = int((now - started) * rate) if rate else ticks
        if not rate:
            await asyncio.sleep(0.05)
        elif due > ticks:
            for device in devices:
                device.publish()
            # Catch up after a late wake-up, but forget more than 0.1 s of backlog: a simulator
            # that cannot keep up shows it as a lower rate, not as one long burst.
            ticks = max(ticks + 1, due - int(rate * BACKLOG_S))
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(max(0.0, (ticks + 1) / rate - (now - started)))  # rate > 0 here
        if now - last_status >= 0.2:
            write_atomically(status, json.dumps({"published": published[0], "at": time.time()}))
            last_status = now


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
