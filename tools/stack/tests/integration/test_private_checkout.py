"""A checkout only its owner can enter (mode 700, as root's home and any `mktemp -d` are):
Elasticsearch and Cassandra, which run as an unprivileged user when we are root, still come
up, from a home of their own that user can reach.

The clone is real (`git clone` of this repository) and its servers use their own ports; the
Maven cache (~/.m2) makes their install a local copy. Before this, Elasticsearch died at
once: `bin/elasticsearch: Permission denied`.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fluxgate_stack import servers, users
from fluxgate_stack.errors import InstallError
from fluxgate_stack.servers.elasticsearch import free_ports
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.stack import Stack

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture
def private_clone() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="fluxgate-private-"))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    try:
        subprocess.run(["git", "clone", "-q", str(REPO), str(root / "clone")], check=True, timeout=120)
        yield root / "clone"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_checkout_only_root_can_enter_runs_elasticsearch_and_cassandra(private_clone: Path) -> None:
    es_port, es_transport, cql, gossip = free_ports(4)
    settings = StackSettings(
        home=private_clone,
        es_port=es_port,
        es_transport_port=es_transport,
        cassandra_port=cql,
        cassandra_storage_port=gossip,
        es_heap="256m",
        cassandra_heap="512m",
    )
    local = settings.local_dir
    elsewhere = users.unprivileged_local_dir(local, settings.es_user, settings.unprivileged_home)
    if os.geteuid() == 0:  # as anyone else the servers run as that user, in the checkout itself
        assert elsewhere != local and not users.can_traverse(local, settings.es_user)
    stack = Stack(settings)
    umask = os.umask(0o077)  # root's own may be this strict: the servers' user must still get in
    try:
        endpoints = stack.up(["elasticsearch", "cassandra"])
        os.umask(umask)
        assert httpx.get(f"{endpoints.elasticsearch_url}/_cluster/health", timeout=10).json()["status"] != "red"
        assert {s.name: s.state for s in stack.status()}["cassandra"] == "ready"
    finally:
        os.umask(umask)
        stack.purge()  # what `make clean` does: stops them, deletes the home outside the checkout too
    assert not elsewhere.exists()


def test_a_home_the_server_user_cannot_reach_fails_before_anything_starts(private_clone: Path) -> None:
    """As root: pointing the unprivileged servers' home inside the private checkout cannot
    work, and `up` says so in one line before it starts any server."""
    blocked = private_clone / "unreachable"
    settings = StackSettings(home=private_clone, unprivileged_home=blocked, es_port=free_ports(1)[0])
    stack = Stack(settings)
    if os.geteuid() != 0:
        assert not any(server.unprivileged_user() for server in servers.build(["elasticsearch"], settings))
        return  # as anyone else the servers run as that same user: nothing to reach
    with pytest.raises(InstallError) as failed:
        stack.up(["elasticsearch"])
    message = str(failed.value)
    assert message.startswith("elasticsearch: runs as user 'fluxgate', who cannot read ")
    assert str(blocked) in message and "FLUXGATE_STACK_UNPRIVILEGED_HOME" in message and "\n" not in message
    assert {s.name: s.state for s in stack.status()}["elasticsearch"] == "stopped"
