"""aiocoap's UDP transport, patched: one wake-up of the socket reads every datagram waiting, up to a bound."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from aiocoap.util.asyncio.recvmsg import RecvmsgSelectorDatagramTransport, create_recvmsg_datagram_endpoint

from fluxgate_coap_ingest.datagrams import MAX_DATAGRAMS_PER_WAKEUP, read_waiting_datagrams


class Received:
    """The protocol aiocoap's transport talks to, keeping what it is handed."""

    def __init__(self) -> None:
        self.datagrams: list[bytes] = []

    def connection_made(self, transport: Any) -> None:
        pass

    def datagram_msg_received(self, data: bytes, ancdata: Any, flags: int, address: Any) -> None:
        self.datagrams.append(data)

    def datagram_errqueue_received(self, *args: Any) -> None:
        pass

    def error_received(self, exc: Exception) -> None:
        raise exc

    def connection_lost(self, exc: Exception | None) -> None:
        pass


@pytest.fixture
def patched() -> Iterator[None]:
    original = RecvmsgSelectorDatagramTransport._read_ready
    read_waiting_datagrams()
    yield
    RecvmsgSelectorDatagramTransport._read_ready = original


async def read_once_after_sending(count: int) -> list[bytes]:
    """Send ``count`` datagrams, then let the transport wake up once (no loop turn in between)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    transport, protocol = await create_recvmsg_datagram_endpoint(asyncio.get_running_loop(), Received, sock)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for index in range(count):
            sender.sendto(str(index).encode(), sock.getsockname())
        transport._read_ready()
    transport.close()
    return list(protocol.datagrams)


async def test_one_wake_up_reads_every_datagram_waiting_in_order(patched: None) -> None:
    assert await read_once_after_sending(3) == [b"0", b"1", b"2"]


async def test_one_wake_up_reads_at_most_the_bound(patched: None) -> None:
    got = await read_once_after_sending(MAX_DATAGRAMS_PER_WAKEUP + 5)
    assert got == [str(index).encode() for index in range(MAX_DATAGRAMS_PER_WAKEUP)]


async def test_unpatched_aiocoap_reads_one_datagram_per_wake_up() -> None:
    """Why the patch exists (and a sign to drop it when aiocoap reads more by itself)."""
    if RecvmsgSelectorDatagramTransport._read_ready.__module__ != "aiocoap.util.asyncio.recvmsg":
        pytest.skip("patched by an earlier test in this process")
    assert await read_once_after_sending(3) == [b"0"]
