"""What ``fluxgate connect`` runs against: the local stack, plus a Hazelcast member of its own.

The Hazelcast sink of the documents presents the group (cluster) name ``dev``; the stack's
member is ``fluxgate``. A throwaway member named ``dev`` on a free port (the stack's jar, a
temporary folder) runs for the session, so the config keeps its ``dev`` unchanged.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fluxgate_testing import free_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def dev_member() -> Iterator[str]:
    """``127.0.0.1:<port>`` of a one-member Hazelcast cluster named ``dev``."""
    from fluxgate_stack import process
    from fluxgate_stack.servers.hazelcast import HazelcastServer
    from fluxgate_stack.settings import StackSettings

    port = free_port()
    member = HazelcastServer(StackSettings(hazelcast_port=port, hazelcast_cluster="dev"))
    if not member.is_installed():
        member.install()
    member.run_dir = Path(tempfile.mkdtemp(prefix="fluxgate-hz-dev-"))  # never the stack member's folder
    member.log_file = member.run_dir / "hazelcast.log"
    record = None
    try:
        for path, text in member.config_files().items():
            path.write_text(text)
        record = process.spawn(member.command(), cwd=member.run_dir, log_file=member.log_file)
        deadline = time.monotonic() + 90
        while not member.probe():
            assert process.is_alive(record), process.tail(member.log_file)
            assert time.monotonic() < deadline, "the dev member is not ready after 90 s"
            time.sleep(0.25)
        yield member.address
    finally:
        if record is not None:
            process.terminate(record, member.stop_grace)
        shutil.rmtree(member.run_dir, ignore_errors=True)
