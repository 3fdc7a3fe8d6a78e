"""How aiocoap's UDP transport reads: whole datagrams, and every one waiting per wake-up.

Both are patches of ``RecvmsgSelectorDatagramTransport`` (aiocoap 0.4), applied once at start.
"""

from __future__ import annotations

from typing import Any

from aiocoap.util.asyncio.recvmsg import RecvmsgSelectorDatagramTransport

MAX_UDP_DATAGRAM = 65_535
# A bound, so one busy socket cannot keep the event loop from everything else: 64 is above what
# the devices of one gateway have unacknowledged (one confirmable notification per endpoint pair).
MAX_DATAGRAMS_PER_WAKEUP = 64
_SOCKET = "_RecvmsgSelectorDatagramTransport__sock"  # aiocoap's private socket attribute
_read_one = RecvmsgSelectorDatagramTransport._read_ready


def receive_whole_datagrams() -> None:
    """aiocoap reads UDP into 4 KiB and ignores MSG_TRUNC: a larger notification sent in one
    datagram (no Block2) reached us cut short and was parsed as if whole. Read any datagram
    whole; the payload limit is checked after."""
    RecvmsgSelectorDatagramTransport.max_size = MAX_UDP_DATAGRAM


def read_waiting_datagrams() -> None:
    """aiocoap reads one datagram per wake-up of its socket, so each notification cost an event-loop
    turn (and the socket's poll) of its own, and arrived alone: the notifications of many devices
    could never be batched. Read what is waiting, up to a bound, then let the loop go on."""
    RecvmsgSelectorDatagramTransport._read_ready = _read_waiting


def _read_waiting(transport: Any) -> None:
    _read_one(transport)  # the error queue and one datagram, as aiocoap does
    for _ in range(MAX_DATAGRAMS_PER_WAKEUP - 1):
        sock = getattr(transport, _SOCKET, None)
        if sock is None:  # closed by what the last datagram set off
            return
        try:
            data, ancdata, flags, address = sock.recvmsg(transport.max_size, 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            transport._protocol.error_received(exc)
            return
        transport._protocol.datagram_msg_received(data, ancdata, flags, address)
