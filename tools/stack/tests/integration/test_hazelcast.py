"""The real Hazelcast member: ready, takes a client with its cluster name, has the declared
capacities, and comes back (empty: it keeps data in memory only) after a SIGKILL.

Uses the root conftest's session fixture ``hazelcast`` (starts it if needed, ~1-2 s).
hazelcast-python-client is the Hazelcast persister's driver, installed in the workspace's
virtual environment with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hazelcast import HazelcastClient
from hazelcast.errors import IllegalStateError

from fluxgate_stack import Stack, kill, probes, start
from fluxgate_stack.servers.hazelcast import HEALTH_PATH

pytestmark = pytest.mark.integration


def connect(hazelcast: tuple[str, str]) -> Any:
    address, cluster = hazelcast
    return HazelcastClient(cluster_members=[address], cluster_name=cluster, cluster_connect_timeout=20)


@pytest.fixture
def client(hazelcast: tuple[str, str]) -> Iterator[Any]:
    hz = connect(hazelcast)
    yield hz
    hz.shutdown()


def test_up_and_ready(hazelcast: tuple[str, str], client: Any) -> None:
    address, cluster = hazelcast
    assert (address, cluster) == ("127.0.0.1:5701", "fluxgate") or address == Stack().endpoints().hazelcast_address
    assert probes.http_ok(f"http://{address}{HEALTH_PATH}")
    [status] = [s for s in Stack().status() if s.name == "hazelcast"]
    assert status.state in ("ready", "external")
    assert len(client.cluster_service.get_members()) == 1


def test_declared_capacities(client: Any) -> None:
    name = uuid.uuid4().hex[:8]
    ringbuffer = client.get_ringbuffer(f"stack-test-{name}").blocking()
    assert ringbuffer.capacity() == 100_000
    bounded = client.get_queue(f"bounded-{name}").blocking()
    assert bounded.remaining_capacity() == 100
    assert all(bounded.offer(n) for n in range(100))
    assert not bounded.offer(100, timeout=0)  # full: a persister must back off
    assert client.get_queue(f"stack-test-{name}").blocking().remaining_capacity() >= 2**31 - 1
    bounded.destroy()
    ringbuffer.destroy()


def test_what_the_open_source_member_guards(hazelcast: tuple[str, str], client: Any) -> None:
    """The open-source member has no authentication and no TLS (Enterprise features): what it
    does offer is a cluster name every client must present, the loopback interface only, and
    REST limited to the health check, so no HTTP client reads or writes its data."""
    address, _ = hazelcast
    client.get_map("stack-test-guarded").blocking().put("k", "v")
    with pytest.raises(IllegalStateError):  # refused (AuthenticationError) on every attempt, then given up
        HazelcastClient(cluster_members=[address], cluster_name="not-fluxgate", cluster_connect_timeout=2)
    for path in ("/hazelcast/rest/maps/stack-test-guarded/k", "/hazelcast/rest/cluster"):
        # A disabled endpoint group gets no answer at all: the member closes the connection.
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(f"http://{address}{path}", timeout=10)
    client.get_map("stack-test-guarded").blocking().destroy()


@pytest.mark.serial(kills="hazelcast")
def test_kill_then_start_comes_back_empty(hazelcast: tuple[str, str]) -> None:
    name = f"stack-test-{uuid.uuid4().hex[:8]}"
    hz = connect(hazelcast)
    try:
        hz.get_map(name).blocking().put("k", "v")
    finally:
        hz.shutdown()
    kill("hazelcast")
    address, _ = hazelcast
    assert not probes.http_ok(f"http://{address}{HEALTH_PATH}")
    assert start("hazelcast").hazelcast_address == address
    hz = connect(hazelcast)
    try:
        assert hz.get_map(name).blocking().size() == 0  # in memory only
    finally:
        hz.shutdown()
