"""A service as an operator runs it: its own process, configured by environment, probed over HTTP."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class ServiceProcess:
    """One service process. Its output (stdout and stderr) goes to a file, never a pipe that
    could fill and block it. ``env`` is merged over ``os.environ``, minus the variables
    starting with ``isolate_prefix`` (a developer's own settings must not leak in).
    Start it again after it exited to restart it; the log file is appended to.
    """

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        health_port: int,
        log_path: Path | None = None,
        isolate_prefix: str | None = None,
    ) -> None:
        self.argv = [str(arg) for arg in argv]
        inherited = {
            key: value
            for key, value in os.environ.items()
            if not (isolate_prefix and key.upper().startswith(isolate_prefix.upper()))
        }
        self.env = {**inherited, **env}
        self.health_port = health_port
        self.log_path = log_path or Path(tempfile.mkstemp(prefix="service-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_ready: bool = True, timeout: float = 60.0) -> ServiceProcess:
        """Start the process (its own session, so :meth:`kill` takes its children too)."""
        assert not self.running, "already running"
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        if wait_ready:
            self.wait_ready(timeout)
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def get(self, path: str) -> tuple[int, str]:
        """``GET path`` on the health port: (status, body); (0, "") when nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=2) as reply:
                return int(reply.status), reply.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except OSError:
            return 0, ""

    def ready(self) -> bool:
        """``/readyz`` answers 200."""
        return self.get("/readyz")[0] == 200

    def metrics(self) -> str:
        """The ``/metrics`` text ("" when nothing answers)."""
        return self.get("/metrics")[1]

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
        total = 0.0
        for line in self.metrics().splitlines():
            sample = _SAMPLE.match(line)
            if sample is None or sample["name"] != name:
                continue
            found = dict(_LABEL.findall(sample["labels"] or ""))
            if all(found.get(key) == value for key, value in labels.items()):
                total += float(sample["value"])
        return total

    def wait_until(self, condition: Callable[[], bool], what: str | Callable[[], str], timeout: float = 30.0) -> None:
        """Poll ``condition``; fail with the log's tail if the process exits or time runs out.
        ``what`` may be a callable, asked only on failure: what was seen last goes first in
        the message, ahead of a log tail a CI summary may cut."""
        deadline = time.monotonic() + timeout
        while not condition():
            if not self.running:
                code = self.process.returncode if self.process else None
                raise AssertionError(f"exited with {code} waiting for {_said(what)}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {_said(what)}:\n{self.log_tail()}")
            time.sleep(0.1)

    def wait_ready(self, timeout: float = 60.0) -> None:
        self.wait_until(self.ready, "/readyz", timeout)

    def signal(self, signum: int, timeout: float = 30.0) -> int:
        """Send ``signum`` to the process and return its exit code (``-signum`` if it killed it)."""
        assert self.process is not None, "start() first"
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.wait(timeout)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (the service drains), wait, and return the exit code."""
        return self.signal(signal.SIGTERM, timeout)

    def pause(self) -> None:
        """SIGSTOP the process and everything it started: it does nothing more until killed or
        continued, so a test can change the world around it without racing it."""
        assert self.process is not None and self.process.poll() is None, "not running"
        os.killpg(self.process.pid, signal.SIGSTOP)

    def kill(self) -> None:
        """SIGKILL the process and everything it started (a JVM ...), then reap it."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.process.wait(30)

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit; its exit code."""
        assert self.process is not None, "start() first"
        return self.process.wait(timeout)

    def log_text(self) -> str:
        """Everything it printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill()


def _said(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def descendants(roots: Iterable[int]) -> list[int]:
    """``roots`` and every live process below them, each once (a service's Spark JVM, its
    Python daemon and workers), found by their parent ids in ``/proc``."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                children[int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])].append(int(entry.name))
    found: dict[int, None] = {}
    pending = list(roots)
    while pending:
        pid = pending.pop()
        if pid not in found:
            found[pid] = None
            pending.extend(children.get(pid, ()))
    return list(found)
