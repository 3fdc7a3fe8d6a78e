"""The shared lifecycle (start, reuse, restart on new settings, failures, stop) on a tiny fake server.

The fake is Python's own http.server, so these tests need no downloads and take ~2 s.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from fluxgate_stack import process, servers
from fluxgate_stack.errors import PortInUse, ServerNotReady
from fluxgate_stack.probes import http_ok
from fluxgate_stack.servers.base import Port, Server
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.stack import Stack

pytestmark = pytest.mark.integration  # real processes and ports, though no server of the stack


class FakeServer(Server):
    name = "fake"
    ready_timeout = 5.0
    stop_grace = 2.0
    port: ClassVar[int] = 0
    argv: ClassVar[list[str]] = []  # replaces the command when set
    ready: ClassVar[bool] = True

    def ports(self) -> list[Port]:
        return [Port(self.port)]

    def command(self) -> list[str]:
        return self.argv or [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1"]

    def probe(self) -> bool:
        return self.ready and http_ok(f"http://127.0.0.1:{self.port}/")

    def env(self) -> dict[str, str]:
        return {}


class NeedyServer(FakeServer):
    """A fake that needs ``fake`` ready before it starts, as the registry needs Kafka."""

    name = "needy"
    requires = ("fake",)
    port: ClassVar[int] = 0
    saw_fake_ready: ClassVar[bool | None] = None

    def configure(self) -> None:  # runs right before the process is spawned
        NeedyServer.saw_fake_ready = http_ok(f"http://127.0.0.1:{FakeServer.port}/")
        super().configure()


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    monkeypatch.setattr(servers, "SERVER_TYPES", {"fake": FakeServer})
    monkeypatch.setattr(FakeServer, "port", free_port())
    monkeypatch.setattr(FakeServer, "argv", [])
    monkeypatch.setattr(FakeServer, "ready", True)
    stack = Stack(StackSettings(home=tmp_path))
    yield stack
    stack.down()


def test_up_reuse_down(stack: Stack) -> None:
    stack.up(["fake"])
    (status,) = stack.status()
    assert status.state == "ready" and status.pid is not None
    stack.up(["fake"])
    assert stack.status()[0].pid == status.pid  # reused, not restarted
    record = process.read_pidfile(FakeServer(stack.settings).pid_file)
    assert record is not None
    stack.down(["fake"])
    assert not process.is_alive(record)
    assert stack.status()[0].state == "stopped"


def test_changed_settings_restart_the_server(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    stack.up(["fake"])
    before = stack.status()[0].pid
    monkeypatch.setattr(FakeServer, "argv", [*FakeServer(stack.settings).command(), "--protocol", "HTTP/1.1"])
    stack.up(["fake"])
    assert stack.status()[0].pid not in (None, before)


def test_a_required_server_is_started_and_ready_first(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "SERVER_TYPES", {"fake": FakeServer, "needy": NeedyServer})
    monkeypatch.setattr(NeedyServer, "port", free_port())
    stack.up(["needy"])
    assert NeedyServer.saw_fake_ready is True
    assert [status.state for status in stack.status()] == ["ready", "ready"]


def test_exit_during_start_shows_the_log(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeServer, "argv", [sys.executable, "-c", "print('bad config: no way'); raise SystemExit(3)"])
    with pytest.raises(ServerNotReady, match="fake: exited during start-up") as failed:
        stack.up(["fake"])
    assert "bad config: no way" in failed.value.log_tail


def test_timeout_stops_the_server(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeServer, "ready", False)
    monkeypatch.setattr(FakeServer, "ready_timeout", 1.0)
    with pytest.raises(ServerNotReady, match="fake: not ready after 1s"):
        stack.up(["fake"])
    assert stack.status()[0].state == "stopped"


def test_someone_elses_ready_server_is_used_not_stopped(stack: Stack) -> None:
    args = [sys.executable, "-m", "http.server", str(FakeServer.port), "--bind", "127.0.0.1"]
    with subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as foreign:
        try:
            wait_until(lambda: http_ok(f"http://127.0.0.1:{FakeServer.port}/"))
            stack.up(["fake"])
            assert stack.status()[0].state == "external"
            stack.down(["fake"])
            assert foreign.poll() is None
        finally:
            foreign.kill()


def test_port_held_by_something_else_is_an_error(stack: Stack) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", FakeServer.port))  # bound, not listening: the probe fails fast
        with pytest.raises(PortInUse, match=f"fake: port {FakeServer.port}/tcp"):
            stack.up(["fake"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
