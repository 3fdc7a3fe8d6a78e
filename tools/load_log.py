"""The machine's load while `make test` runs, until stopped: every second, one line of the
kernel's CPU counters and the memory still available, and in a second file the CPU each kind of
process used since the sample before (Kafka, Spark, a pytest worker, a service, podman, ...).
`tools/test_times.py --load` reads both back for each phase's window.

Whether the suite can take another pytest worker is decided by the cores' busy share, not by the
tests' seconds alone: a phase that leaves the cores idle is waiting on servers and timers. Where
a busy phase's CPU goes says what a shorter suite has to do less of.

A process that lives less than a second between two samples is not seen: its CPU counts in the
machine's line and in no kind.

    python tools/load_log.py .local/test-times/load.log [--every 1]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

PROC = Path("/proc")
# A JVM is named by what it runs: the first of these found in its command line.
JAVA_KINDS = (
    ("kafka.Kafka", "kafka"),
    ("org.elasticsearch", "elasticsearch"),
    ("org.apache.cassandra", "cassandra"),
    ("apicurio", "registry"),  # before keycloak: the secured registry's flags name its Keycloak
    ("keycloak", "keycloak"),
    ("hazelcast", "hazelcast"),
    ("org.apache.spark", "spark"),
)


def sample(stat: str, meminfo: str, now: float) -> str:
    """``"<epoch> <busy jiffies> <total jiffies> <MemTotal kB> <MemAvailable kB>"`` from the
    text of /proc/stat and /proc/meminfo. Busy is all but idle and iowait."""
    fields = [int(value) for value in stat.splitlines()[0].split()[1:]]
    total = sum(fields[:8])  # guest time is counted in user time already
    busy = total - fields[3] - fields[4]
    memory = {line.split(":")[0]: int(line.split()[1]) for line in meminfo.splitlines() if ":" in line}
    return f"{now:.0f} {busy} {total} {memory['MemTotal']} {memory['MemAvailable']}"


def kind_of(argv: list[str]) -> str:
    """What a process is, from its command line: a server or Spark by the class its JVM runs, a
    pytest worker, a Python service or tool by its script's or module's name, else the program."""
    if not argv:
        return "kernel"  # kernel threads have no command line
    program = Path(argv[0]).name
    if program == "java":
        line = " ".join(argv)
        return next((kind for marker, kind in JAVA_KINDS if marker in line), "java")
    if not program.startswith("python"):
        return program
    if "-c" in argv:  # pytest-xdist starts its workers with `python -u -c <bootstrap>`
        return "pytest-worker"
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1]
    scripts = [arg for arg in argv[1:] if not arg.startswith("-")]
    return Path(scripts[0]).name if scripts else program


def process_ticks(proc: Path = PROC) -> dict[tuple[int, int], tuple[str, int]]:
    """Every live process's ``(pid, start time) -> (kind, user + system ticks)``: the start time
    tells a reused pid from the process it once was."""
    seen: dict[tuple[int, int], tuple[str, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # it exited while being read
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # from the state on: field 3 is fields[0]
        ticks, started = int(fields[11]) + int(fields[12]), int(fields[19])
        seen[(int(entry.name), started)] = (kind_of([arg for arg in argv if arg]), ticks)
    return seen


def by_kind(
    before: dict[tuple[int, int], tuple[str, int]], after: dict[tuple[int, int], tuple[str, int]]
) -> dict[str, int]:
    """The ticks each kind used between two scans: a process new in the second counts whole."""
    used: dict[str, int] = {}
    for key, (kind, ticks) in after.items():
        delta = ticks - before.get(key, (kind, 0))[1]
        if delta > 0:
            used[kind] = used.get(kind, 0) + delta
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the file to append the samples to; by kind: <log>.kinds")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    args = parser.parse_args(argv)
    # .ci/run stops it with SIGTERM once the tests are done: leave quietly, the files complete.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    args.log.parent.mkdir(parents=True, exist_ok=True)
    kinds_log = args.log.with_name(args.log.name + ".kinds")
    before = process_ticks()
    with args.log.open("a") as out, kinds_log.open("a") as kinds:
        while True:
            now = time.time()
            out.write(sample((PROC / "stat").read_text(), (PROC / "meminfo").read_text(), now) + "\n")
            after = process_ticks()
            kinds.writelines(
                f"{now:.0f} {kind.replace(' ', '_')} {ticks}\n" for kind, ticks in by_kind(before, after).items()
            )
            before = after
            out.flush()
            kinds.flush()
            time.sleep(args.every)


if __name__ == "__main__":
    raise SystemExit(main())
