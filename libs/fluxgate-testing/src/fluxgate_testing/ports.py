"""Free loopback ports for the services a test or a run starts, outside the kernel's ephemeral range.

A port the kernel hands out for ``bind(0)`` comes from its ephemeral range, the range every
outgoing connection and every JVM's "any port" (Spark's driver and block manager) also draw
from. Between picking such a port and the service binding it, another process could take it:
a soak's console lost its health port to the Spark driver started just before it so. Below the
ephemeral range nothing takes a port unless asked for it by number.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Below the fixed ports of the stack and the services (all under 20000) and above those of
# everything else on a development machine, as far as we know.
_FIRST = 20000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_pick = random.SystemRandom()  # not the random module's state: a test may seed it, alike in each worker
_given: set[int] = set()  # handed out by this process: never twice, whether bound yet or not


def _candidates() -> range:
    try:
        low, high = (int(part) for part in _EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default range
    return range(_FIRST, low) if low - _FIRST >= 1000 else range(high + 1, 65536)


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port nothing listens on right now (TCP by default, ``SOCK_DGRAM`` for UDP),
    outside the ephemeral range, and not handed out before by this process."""
    candidates = _candidates()
    for _ in range(500):
        port = _pick.choice(candidates)
        if port in _given:
            continue
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {candidates.start}-{candidates.stop - 1}")
