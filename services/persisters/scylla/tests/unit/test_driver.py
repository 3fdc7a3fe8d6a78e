"""The connection class is libev, chosen explicitly: nothing depends on asyncore (gone in 3.12)."""

from __future__ import annotations

import subprocess
import sys

from cassandra.io.libevreactor import LibevConnection

from fluxgate_scylla_persister.driver import make_cluster
from fluxgate_scylla_persister.settings import ConnectionSettings

WITHOUT_ASYNCORE = """
import sys
sys.modules["asyncore"] = None  # as on Python 3.12: importing it fails
import fluxgate_scylla_persister.sink
from fluxgate_scylla_persister.driver import make_cluster
from fluxgate_scylla_persister.settings import ConnectionSettings
print(make_cluster(ConnectionSettings()).connection_class.__name__)
"""


def test_the_cluster_uses_libev() -> None:
    cluster = make_cluster(ConnectionSettings())
    assert cluster.connection_class is LibevConnection
    assert cluster.profile_manager.default.request_timeout == 10.0


def test_importing_the_persister_never_needs_asyncore() -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_ASYNCORE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "LibevConnection"
