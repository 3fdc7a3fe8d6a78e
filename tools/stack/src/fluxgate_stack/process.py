"""Background processes we start, and only those: pidfiles that survive the CLI process.

Each server runs in its own session (so its own process group) with stdout and stderr
appended to its log. The pidfile records the pid *and* the kernel start time, so a pid
recycled by an unrelated process is never mistaken for ours and never signalled.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

Proto = Literal["tcp", "udp"]
START_MARKER = "=== fluxgate-stack start "  # begins the line written to a log before each start

# Popen objects of servers started by this Python process: polling them reaps the zombie
# of a crashed server, which would otherwise still look alive in /proc.
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class PidRecord:
    pid: int
    start_ticks: int
    command: tuple[str, ...] = ()
    fingerprint: str = ""  # of the configuration it was started with


def spawn(command: list[str], *, cwd: Path, log_file: Path, env: dict[str, str] | None = None) -> PidRecord:
    """Start ``command`` detached in a new session, appending its output to ``log_file``."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        stamp = datetime.now().isoformat(timespec="seconds")
        log.write(f"\n{START_MARKER}{stamp}: {' '.join(command)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _children[proc.pid] = proc
    return PidRecord(proc.pid, _stat(proc.pid)[1], tuple(command))


def write_pidfile(path: Path, record: PidRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record)))
    tmp.replace(path)  # atomic, so a reader never sees half a pidfile


def read_pidfile(path: Path) -> PidRecord | None:
    try:
        raw = json.loads(path.read_text())
        command = tuple(str(part) for part in raw.get("command", ()))
        return PidRecord(int(raw["pid"]), int(raw["start_ticks"]), command, str(raw.get("fingerprint", "")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # unreadable counts as absent
        return None


def is_alive(record: PidRecord) -> bool:
    """True while the very process we started runs (not a zombie, not a recycled pid)."""
    child = _children.get(record.pid)
    if child is not None and child.poll() is not None:
        del _children[record.pid]
        return False
    state, ticks = _stat(record.pid)
    return state not in ("", "Z", "X") and ticks == record.start_ticks


def terminate(record: PidRecord, grace: float) -> None:
    """SIGTERM the process group, wait up to ``grace`` seconds, then SIGKILL it."""
    # Checked first so a dead server's recycled pid is never signalled.
    if not is_alive(record):
        return
    _signal_group(record, signal.SIGTERM)
    if not _wait_dead(record, grace):
        _signal_group(record, signal.SIGKILL)
        _wait_dead(record, 10)


def kill(record: PidRecord) -> None:
    """SIGKILL the process group at once: what a crash looks like to clients."""
    if is_alive(record):
        _signal_group(record, signal.SIGKILL)
        _wait_dead(record, 10)


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines written since the latest start (earlier runs only confuse)."""
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 64 * 1024))
            text = log.read().decode(errors="replace")
    except OSError:
        return f"(no log at {path})"
    latest_run = text[text.rfind(START_MARKER) :] if START_MARKER in text else text
    return "\n".join(latest_run.splitlines()[-lines:])


def port_free(host: str, port: int, proto: Proto = "tcp") -> bool:
    """True if nothing is bound to ``host:port`` (a bind attempt, so it also works for UDP)."""
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, kind) as sock:
        # SO_REUSEADDR ignores TIME_WAIT leftovers of a server we just stopped.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _stat(pid: int) -> tuple[str, int]:
    """(state, start time in clock ticks) from /proc/<pid>/stat; ("", 0) if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", 0
    # The command name may contain spaces and parentheses: split after the last ")".
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _signal_group(record: PidRecord, sig: signal.Signals) -> None:
    try:
        if os.getpgid(record.pid) != record.pid:
            os.kill(record.pid, sig)  # not a group leader after all: signal only the process
            return
        os.killpg(record.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_dead(record: PidRecord, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(record):
            return True
        time.sleep(0.1)
    return not is_alive(record)
