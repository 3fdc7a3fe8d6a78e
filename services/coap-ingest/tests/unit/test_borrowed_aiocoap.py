"""What coap-ingest borrows from aiocoap's private code (pinned `aiocoap>=0.4.17,<0.5` in
pyproject.toml), checked against the installed release: a new aiocoap that renames or changes
any of it fails here, naming what changed and where coap-ingest relies on it.

* ``datagrams.py`` replaces ``RecvmsgSelectorDatagramTransport._read_ready`` (one datagram per
  wake-up) and raises ``max_size`` (4 KiB, MSG_TRUNC ignored): it reads the name-mangled socket
  ``__sock`` and hands datagrams to ``_protocol.datagram_msg_received``/``error_received``;
* ``blockwise.py`` assembles block-wise notifications itself, bounded, through
  ``Context.request(message, handle_blockwise=False)``: aiocoap's own assembly has no bound.
"""

from __future__ import annotations

import inspect
import socket
from typing import Any

import aiocoap
import aiocoap.meta
from aiocoap.util.asyncio.recvmsg import RecvmsgSelectorDatagramTransport

from fluxgate_coap_ingest import datagrams

VERSION = aiocoap.meta.version


def test_the_transport_internals_datagrams_py_patches_are_there() -> None:
    where = "services/coap-ingest/src/fluxgate_coap_ingest/datagrams.py"
    gone = f"aiocoap {VERSION}: RecvmsgSelectorDatagramTransport._read_ready is gone; {where}"
    assert callable(datagrams._read_one), gone
    assert isinstance(RecvmsgSelectorDatagramTransport.max_size, int), f"aiocoap {VERSION}: max_size is gone; {where}"
    source = inspect.getsource(RecvmsgSelectorDatagramTransport)
    for used in ("self.__sock = sock", "self._protocol = protocol", "self._protocol.datagram_msg_received("):
        assert used in source, f"aiocoap {VERSION}: `{used}` is no longer in the transport; {where} relies on it"


def test_the_mangled_socket_name_reaches_the_socket() -> None:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        transport: Any = object.__new__(RecvmsgSelectorDatagramTransport)
        transport.__dict__[datagrams._SOCKET] = sock  # what __init__ sets, under the mangled name
        assert getattr(transport, datagrams._SOCKET) is sock
        assert datagrams._SOCKET == "_RecvmsgSelectorDatagramTransport__sock"
    finally:
        sock.close()


def test_requests_can_leave_block_wise_assembly_to_us() -> None:
    parameters = inspect.signature(aiocoap.Context.request).parameters
    assert "handle_blockwise" in parameters, (
        f"aiocoap {VERSION}: Context.request lost handle_blockwise; "
        "services/coap-ingest/src/fluxgate_coap_ingest/blockwise.py assembles notifications itself with it"
    )
