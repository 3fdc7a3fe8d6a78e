"""Where the suite's time goes: the seconds of each test file (and its package), from the JUnit
XML `make test` writes, slowest first.

pytest's own --durations lists single tests; the suite's length is decided by files, which
`--dist loadfile` hands to a worker whole, and by packages, which a change usually grows. With
`--load`, the machine's load over the phase too (`tools/load_log.py`): cores that stay idle
while the tests run say the phase is waiting, and could take another worker.

    python tools/test_times.py .local/test-times/parallel.xml [--top 25] [--load load.log]
"""

from __future__ import annotations

import argparse
import os
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

GIB_IN_KIB = 1024 * 1024
TICKS_PER_S = os.sysconf("SC_CLK_TCK")  # the unit of /proc's CPU counters


class Sample(NamedTuple):
    """One line of tools/load_log.py."""

    at: float
    busy: int
    total: int
    memory_total_kib: int
    memory_available_kib: int


def seconds_by_file(junit: Path) -> Counter[str]:
    """Each test file's seconds (setup, call and teardown of every test in it)."""
    times: Counter[str] = Counter()
    # pytest wrote it on this machine: not untrusted input.
    for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314
        # classname is the file's dotted path, then the class if any: "a.b.test_x.TestY"
        parts = case.get("classname", "").split(".")
        while len(parts) > 1 and not parts[-1].startswith("test_"):
            parts.pop()
        times["/".join(parts) + ".py"] += float(case.get("time") or 0)
    return times


def phase_window(junit: Path) -> tuple[float, float]:
    """The epoch seconds a phase began and ended: its test suite's timestamp and duration."""
    suite = next(ET.parse(junit).getroot().iter("testsuite"))  # noqa: S314 (as above)
    began = datetime.fromisoformat(suite.get("timestamp", ""))
    # A timestamp without an offset is the machine's local time, as pytest wrote it.
    start = began.timestamp() if began.tzinfo else began.astimezone().timestamp()
    return start, start + float(suite.get("time") or 0)


def read_load(log: Path) -> list[Sample]:
    samples = []
    for line in log.read_text().splitlines():
        fields = line.split()
        if len(fields) == 5:  # a line cut short by the logger's stop is left out
            samples.append(Sample(float(fields[0]), *(int(value) for value in fields[1:])))
    return samples


def load_over(samples: list[Sample], start: float, end: float) -> str:
    """How busy the cores were, on average, between the first and the last sample inside the
    window, and the most memory in use at a sample: or why that cannot be said."""
    inside = [s for s in samples if start <= s.at <= end]
    if len(inside) < 2:
        return "load: fewer than two samples inside the phase"
    first, last = inside[0], inside[-1]
    busy = (last.busy - first.busy) / max(1, last.total - first.total)
    used = max(s.memory_total_kib - s.memory_available_kib for s in inside) / GIB_IN_KIB
    return (
        f"load: cores {busy:.0%} busy over {last.at - first.at:.0f} s, "
        f"at most {used:.1f} of {last.memory_total_kib / GIB_IN_KIB:.1f} GiB of memory in use"
    )


def cpu_by_kind(log: Path, start: float, end: float, top: int) -> str:
    """The CPU-seconds each kind of process used inside the window (tools/load_log.py's
    ``<log>.kinds``), most first."""
    used: Counter[str] = Counter()
    for line in log.read_text().splitlines():
        fields = line.split()
        if len(fields) == 3 and start <= float(fields[0]) <= end:
            used[fields[1]] += int(fields[2])
    total = sum(used.values())
    lines = [f"cpu by process: {total / TICKS_PER_S:.0f} CPU-s in the processes seen"]
    lines += [
        f"{ticks / TICKS_PER_S:8.0f} CPU-s  {ticks / max(1, total):4.0%}  {kind}"
        for kind, ticks in used.most_common(top)
    ]
    return "\n".join(lines)


def package_of(test_file: str) -> str:
    """The package a test file belongs to: the folder above its `tests` folder."""
    head = test_file.split("/tests/")[0]
    return head if head != test_file else test_file.split("/")[0]


def report(times: Counter[str], top: int) -> str:
    packages: Counter[str] = Counter()
    for name, seconds in times.items():
        packages[package_of(name)] += seconds
    total = sum(times.values())
    lines = [f"{total:8.0f} s in {len(times)} files (the sum over workers)", "", "by package:"]
    lines += [f"{s:8.0f} s  {name}" for name, s in packages.most_common(top)]
    lines += ["", "by file:"]
    lines += [f"{s:8.0f} s  {name}" for name, s in times.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="a JUnit XML file pytest wrote (--junitxml)")
    parser.add_argument("--top", type=int, default=25, help="how many packages and files to list")
    parser.add_argument("--load", type=Path, help="tools/load_log.py's samples, for the machine's load")
    args = parser.parse_args(argv)
    if not args.junit.is_file():
        print(f"test_times: no {args.junit}: the phase did not run", file=sys.stderr)
        return 1
    print(report(seconds_by_file(args.junit), args.top))
    if args.load is not None and args.load.is_file():
        window = phase_window(args.junit)
        print(load_over(read_load(args.load), *window))
        kinds = args.load.with_name(args.load.name + ".kinds")
        if kinds.is_file():
            print(cpu_by_kind(kinds, *window, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
