"""Where the suite's time goes: the seconds of each test file (and its package), from the JUnit
XML `make test` writes, slowest first.

pytest's own --durations lists single tests; the suite's length is decided by files, which
`--dist loadfile` hands to a worker whole, and by packages, which a change usually grows.

    python tools/test_times.py .local/test-times/parallel.xml [--top 25]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


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
    args = parser.parse_args(argv)
    if not args.junit.is_file():
        print(f"test_times: no {args.junit}: the phase did not run", file=sys.stderr)
        return 1
    print(report(seconds_by_file(args.junit), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
