"""``fluxgate_testing.free_port``: ports no outgoing connection or JVM can take before the service binds them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fluxgate_testing import free_port, ports


def _ephemeral() -> range:
    low, high = (int(part) for part in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_a_port_is_outside_the_kernels_ephemeral_range_and_free() -> None:
    """A port from the ephemeral range (what ``bind(0)`` hands out) can be taken by any outgoing
    connection before the service binds it: a soak's console lost its health port so."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        port = free_port(kind)
        assert port not in _ephemeral()
        with socket.socket(socket.AF_INET, kind) as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_is_never_handed_out_twice() -> None:
    """Two ports asked for in a row (a service's web and health ports) are two, though neither
    is bound yet."""
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)


def test_a_port_in_use_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first port drawn is one a server listens on: it is passed over, and a port drawn
    after it is handed out. (Those later draws are real: a fixed second port could be in use
    by another test's service, or handed out before in this process, and be passed over too.)"""
    real_choice = ports._pick.choice
    drawn: list[int] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]

        def choice(candidates: range) -> int:
            drawn.append(real_choice(candidates) if drawn else busy)
            return drawn[-1]

        monkeypatch.setattr(ports._pick, "choice", choice)
        port = free_port()
    assert drawn[0] == busy and len(drawn) >= 2
    assert port == drawn[-1] != busy
