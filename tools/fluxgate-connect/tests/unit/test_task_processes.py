"""The members' supervision, with small Python programs as the members: signals reach each once
and are waited for, a failing member stops the others, every line says whose it is."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# A member: says it is up once it handles SIGTERM and SIGINT, then waits for one; exits with
# EXIT at once instead when EXIT is set.
MEMBER = """
import os, signal, sys
if os.environ.get("EXIT"):
    print("failing", flush=True)
    sys.exit(int(os.environ["EXIT"]))
def stop(signum, frame):
    print(f"stopped by {signal.Signals(signum).name}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
print("up", file=sys.stderr, flush=True)
while True:
    signal.pause()
"""

# fluxgate connect's part: supervise the members given as JSON environments.
SUPERVISOR = """
import asyncio, json, os, sys
from fluxgate_connect.task_processes import supervise
envs = [{**os.environ, **env} for env in json.loads(sys.argv[1])]
sys.exit(asyncio.run(supervise([sys.executable, "-c", sys.argv[2]], envs, [f"m-{i}" for i in range(len(envs))])))
"""


@contextmanager
def supervised(*members: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    argv = [sys.executable, "-c", SUPERVISOR, json.dumps(members), MEMBER]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait(30)


def wait_up(process: subprocess.Popen[str], labels: set[str]) -> list[str]:
    """The supervisor's stderr lines until each of ``labels`` said it is up."""
    assert process.stderr is not None
    lines: list[str] = []
    while not all(f"{label} | up\n" in lines for label in labels):
        line = process.stderr.readline()
        assert line, f"the supervisor ended before every member was up: {lines}"
        lines.append(line)
    return lines


def test_a_signal_reaches_every_member_once_and_the_supervisor_waits_for_them() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        with supervised({}, {}) as process:
            wait_up(process, {"m-0", "m-1"})
            process.send_signal(signum)
            out, _ = process.communicate(timeout=60)
            assert process.returncode == 0
            # one line each, on stdout where the member printed it: one signal each, none lost
            assert sorted(out.splitlines()) == [f"m-0 | stopped by {signum.name}", f"m-1 | stopped by {signum.name}"]


def test_a_member_failing_stops_the_others_and_its_code_is_the_exit_code_naming_it() -> None:
    with supervised({}, {}, {"EXIT": "3"}) as process:
        out, err = process.communicate(timeout=60)
    assert process.returncode == 3
    assert "m-2 | failing" in out.splitlines()
    assert "fluxgate connect: m-2 (pid " in err and ") exited with 3: stopping the others" in err
    # and the others were stopped: the supervisor returns only once every member has exited
