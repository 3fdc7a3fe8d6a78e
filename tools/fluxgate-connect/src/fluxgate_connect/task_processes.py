"""The members of ``tasks.max`` > 1 as child processes of ``fluxgate connect``, which stands for
them as one: SIGTERM or SIGINT to it reaches every member once and it waits for them all; a
member that exits non-zero stops the others, and ``fluxgate connect`` exits with its code,
naming it. Each line a member prints is prefixed with its label (``es-persister-1 | ``), on
the stream it was printed on."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
from asyncio.subprocess import PIPE, Process
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO

_LINE_LIMIT = 1 << 20
_PR_SET_PDEATHSIG = 1


def exit_code(returncode: int) -> int:
    """A shell's exit code for a child's return code (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


class _Members:
    """The members started so far and the signal they were sent, if any."""

    def __init__(self) -> None:
        self.started: list[Process] = []
        self.sent: int | None = None
        self.failed: list[int] = []  # exit codes, first failure first

    def add(self, process: Process) -> None:
        self.started.append(process)
        if self.sent is not None:  # it started while the signal was passed on
            self.signal(self.sent)

    def signal(self, signum: int) -> None:
        self.sent = signum
        for process in self.started:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):  # exited, not yet reaped
                    process.send_signal(signum)

    def stop(self) -> None:
        """SIGTERM, unless they were sent a signal already: a second forces a service's stop
        without draining, which is the user's to ask for (a second Ctrl-C), not ours."""
        if self.sent is None:
            self.signal(signal.SIGTERM)


async def supervise(argv: Sequence[str], envs: Sequence[Mapping[str, str]], labels: Sequence[str]) -> int:
    """Run ``argv`` once per environment in ``envs`` until every member exited; the exit code of
    the first member that failed, 0 when none did."""
    loop = asyncio.get_running_loop()
    members = _Members()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, members.signal, signum)
    try:
        for env in envs:
            members.add(await _spawn(argv, env))
        await asyncio.gather(*(_watch(p, label, members) for p, label in zip(members.started, labels, strict=True)))
    finally:
        members.stop()  # nothing outlives us (a member that did not start stops the others)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return members.failed[0] if members.failed else 0


async def _spawn(argv: Sequence[str], env: Mapping[str, str]) -> Process:
    # Its own process group: a terminal's Ctrl-C reaches the members through us, once (a second
    # signal forces a service's stop without draining).
    return await asyncio.create_subprocess_exec(
        *argv,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=PIPE,
        stderr=PIPE,
        limit=_LINE_LIMIT,
        process_group=0,
        preexec_fn=_die_with_parent(),
    )


def _die_with_parent() -> Callable[[], None]:
    """Linux's parent-death signal: members out of our process group would outlive a SIGKILL of
    ``fluxgate connect`` (or a test's kill of its group); they get SIGTERM and drain instead."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in the child
    parent = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return in_child


async def _watch(process: Process, label: str, members: _Members) -> None:
    """Pass the member's output on until it exits; a failure stops the others."""
    assert process.stdout is not None and process.stderr is not None  # both are PIPE
    prefix = f"{label} | ".encode()
    await asyncio.gather(
        _relay(process.stdout, sys.stdout.buffer, prefix), _relay(process.stderr, sys.stderr.buffer, prefix)
    )
    code = exit_code(await process.wait())
    if code != 0:
        first = not members.failed
        members.failed.append(code)
        _say(f"{label} (pid {process.pid}) exited with {code}" + (": stopping the others" if first else ""))
        members.stop()


async def _relay(stream: asyncio.StreamReader, out: BinaryIO, prefix: bytes) -> None:
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # longer than _LINE_LIMIT: asyncio has dropped it
            line = b"(a line longer than 1 MiB, left out)\n"
        if not line:
            return
        try:
            out.write(prefix + line + (b"" if line.endswith(b"\n") else b"\n"))
            out.flush()
        except OSError:  # our output is closed (`| head`): keep reading, or the member blocks writing
            continue


def _say(text: str) -> None:
    sys.stderr.write(f"fluxgate connect: {text}\n")
    sys.stderr.flush()
