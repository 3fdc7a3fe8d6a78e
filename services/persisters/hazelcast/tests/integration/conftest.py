"""A real Hazelcast member for every test here.

The root ``hazelcast`` fixture (the local stack's member) is used when it exists; otherwise
``FLUXGATE_TEST_HAZELCAST=host:port/cluster`` points at an already-running member, with
``FLUXGATE_TEST_HAZELCAST_CONTROL`` a command taking ``kill`` or ``start`` for the tests
that crash it; otherwise the stack is asked for one (``fluxgate_stack.ensure_up``).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from hazelcast import HazelcastClient as SyncClient
from hazelcast.asyncio import HazelcastClient

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Member:
    """Where the member listens, and how a test crashes and revives it."""

    address: str
    cluster_name: str
    control: str | None = None  # a command taking kill|start; None: fluxgate_stack's

    def kill(self) -> None:
        self._do("kill")

    def start(self) -> None:
        self._do("start")

    def _do(self, action: str) -> None:
        if self.control:
            subprocess.run([self.control, action], check=True, timeout=120)
            return
        import fluxgate_stack

        getattr(fluxgate_stack, action)("hazelcast")

    def client_options(self) -> dict[str, Any]:
        return {"cluster_members": [self.address], "cluster_name": self.cluster_name, "cluster_connect_timeout": 30}

    def env(self) -> dict[str, str]:
        """The persister's connection settings, without the FLUXGATE_HZ_ prefix."""
        return {"HAZELCAST__MEMBERS": f'["{self.address}"]', "HAZELCAST__CLUSTER_NAME": self.cluster_name}


def _member(found: Any) -> Member:
    """The root fixture's value, whatever its shape: an object, a (address, cluster) pair or an address."""
    if isinstance(found, Member):
        return found
    if isinstance(found, tuple):
        return Member(str(found[0]), str(found[1]))
    if isinstance(found, str):
        return Member(found, "fluxgate")
    address = getattr(found, "address", None) or getattr(found, "member", None)
    return Member(str(address), str(getattr(found, "cluster_name", "fluxgate")))


@pytest.fixture(scope="session")
def hz_member(request: pytest.FixtureRequest) -> Member:
    if pointed := os.environ.get("FLUXGATE_TEST_HAZELCAST"):
        address, _, cluster = pointed.partition("/")
        return Member(address, cluster or "fluxgate", os.environ.get("FLUXGATE_TEST_HAZELCAST_CONTROL"))
    try:
        return _member(request.getfixturevalue("hazelcast"))
    except pytest.FixtureLookupError:
        from fluxgate_stack import ensure_up

        stack = ensure_up(["hazelcast"])
        return _member(getattr(stack, "hazelcast", stack))


@pytest.fixture
def sync_hz(hz_member: Member) -> Any:
    """A plain (threaded) client for reading back, as a user would."""
    client = SyncClient(**hz_member.client_options())
    yield client
    client.shutdown()


@pytest.fixture
async def hz(hz_member: Member) -> AsyncIterator[HazelcastClient]:
    client = await HazelcastClient.create_and_start(**hz_member.client_options())
    yield client
    await client.shutdown()


@pytest.fixture
def name() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"
