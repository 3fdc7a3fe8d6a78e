"""What the benchmarks share: CPU accounting from /proc, the stack, and how results are written.

Imported as ``_common`` by the scripts next to it; ``python bench/<name>.py`` puts this
folder first on ``sys.path``, so no package or install is needed.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fluxgate_stack import Endpoints, Stack

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results"
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
NEEDED = ("kafka", "registry", "mosquitto")


def full_jit() -> None:
    """Ask the stack for full-JIT JVMs (C2 too), unless the caller chose otherwise.

    Quick-start JVMs (C1 only) start faster but would skew every figure measured against
    them, and a bench that brings servers up itself (``ensure_up``) would restart the running
    ones quick-start, since the flag is part of what it compares. Called by every way a bench
    reaches the stack, not at import: the tests import these modules too.
    """
    os.environ.setdefault("FLUXGATE_STACK_JVM_QUICK_START", "false")


def stack_up(names: Sequence[str] = NEEDED) -> Endpoints:
    """The running local stack as it is, or a fresh one when one of ``names`` is missing.

    Not ``Stack().up()`` unconditionally: a server already ready stays as it is.
    """
    full_jit()
    stack = Stack()
    states = {status.name: status.state for status in stack.status()}
    if all(states.get(name) in {"ready", "external"} for name in names):
        return stack.endpoints()
    return stack.up(list(names))


def server_pid(name: str) -> int | None:
    """Pid of one of the stack's servers, when this machine's stack tool started it."""
    for status in Stack().status():
        if status.name == name and status.state == "ready":
            return int(status.pid) if status.pid is not None else None
    return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a running process (all its threads), 0 when unknown or gone."""
    if pid is None:
        return 0.0
    try:
        return stat_cpu_seconds(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return 0.0


def stat_cpu_seconds(stat: str) -> float:
    """User + system CPU in a process's or a thread's ``/proc`` stat line."""
    # The command name (field 2) may hold spaces; every field after its ")" is numeric.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


# A JVM's JIT compiler threads, as /proc names them (HotSpot's "C2 CompilerThread0", cut to
# the 15 characters the kernel keeps).
COMPILER_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


@dataclass
class CompilerTime:
    """The CPU some JVMs' JIT compiler threads have used so far. HotSpot starts and ends them as
    the work comes and goes, and an ended thread's CPU is no longer in /proc: each thread's last
    reading is kept, so the total only grows (it misses what a thread used in its last
    interval). A thread's name is read once: a sample reads the compilers' stat files alone."""

    proc: Path = Path("/proc")
    last: dict[tuple[int, int], float] = field(default_factory=dict)
    _compiler: dict[tuple[int, int], bool] = field(default_factory=dict)

    def sample(self, pids: Sequence[int]) -> float:
        for pid in pids:
            try:
                tasks = list((self.proc / str(pid) / "task").iterdir())
            except OSError:
                continue  # the JVM ended
            for task in tasks:
                thread = (pid, int(task.name))
                if thread not in self._compiler:
                    self._compiler[thread] = _read(task / "comm").startswith(COMPILER_THREADS)
                if self._compiler[thread] and (stat := _read(task / "stat")):
                    self.last[thread] = stat_cpu_seconds(stat)
        return sum(self.last.values())


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""  # the thread ended between the listing and the read


def quick_start_jit(pid: int | None) -> bool | None:
    """Whether a stack JVM runs C1-only (``fluxgate-stack``'s quick start), which lowers its peak."""
    try:
        return b"-XX:TieredStopAtLevel=1" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, TypeError):
        return None


def reap(process: subprocess.Popen[Any], timeout: float) -> float:
    """Wait for a child and return the CPU seconds it used; kill it after ``timeout``.

    ``wait4`` reports the child's exact rusage, which /proc cannot once the child is gone.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.005)
    process.kill()
    process.wait()
    raise TimeoutError(f"{process.args!r} did not finish within {timeout:.0f}s")


@dataclass
class Meter:
    """Wall time and CPU of some processes between ``start()`` and ``stop()``."""

    pids: dict[str, int | None]
    started: float = 0.0
    wall: float = 0.0
    cpu: dict[str, float] | None = None

    def start(self) -> Meter:
        self.cpu = {name: -cpu_seconds(pid) for name, pid in self.pids.items()}
        self.started = time.perf_counter()
        return self

    def stop(self) -> Meter:
        self.wall = time.perf_counter() - self.started
        assert self.cpu is not None, "start() first"
        self.cpu = {name: used + cpu_seconds(self.pids[name]) for name, used in self.cpu.items()}
        return self


class CpuSampler:
    """CPU seconds of some processes, sampled in a thread, to read between two instants later.

    Spark reports when each micro-batch started and how long it took; sampling lets the CPU of
    exactly the steady batches be told apart from start-up and the first batch afterwards.
    """

    def __init__(self, pids: Sequence[int], interval: float = 0.1, *, jit: Sequence[int] = ()) -> None:
        self._pids = list(pids)
        self._interval = interval
        self._samples: list[tuple[float, float]] = []
        # The JIT compilers' share of ``jit`` (JVMs among ``pids``): CPU that a process running
        # for hours spends once, not per reading.
        self._jit_pids, self._compilers = list(jit), CompilerTime()
        self._jit_samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self._interval):
                self._sample()
                return

    def _sample(self) -> None:
        now = time.time()
        self._samples.append((now, sum(cpu_seconds(pid) for pid in self._pids)))
        if self._jit_pids:
            self._jit_samples.append((now, self._compilers.sample(self._jit_pids)))

    def used(self, start: float, end: float) -> float:
        """CPU seconds used between two ``time.time()`` instants, interpolated between samples."""
        return self._at(self._samples, end) - self._at(self._samples, start)

    def jit_used(self, start: float, end: float) -> float:
        """Of :meth:`used`, the seconds the ``jit`` JVMs' compiler threads took."""
        return self._at(self._jit_samples, end) - self._at(self._jit_samples, start)

    @staticmethod
    def _at(samples: list[tuple[float, float]], instant: float) -> float:
        if not samples:
            return 0.0
        for (t0, c0), (t1, c1) in itertools.pairwise(samples):
            if t0 <= instant <= t1:
                return c0 + (c1 - c0) * (instant - t0) / (t1 - t0) if t1 > t0 else c1
        return samples[0][1] if instant < samples[0][0] else samples[-1][1]


def spark_conf(pairs: Sequence[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options (repeatable, as spark-submit's) as Spark properties."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key] = value
    return conf


def micros_per(seconds: float, count: int) -> float:
    return round(seconds / count * 1e6, 2) if count else 0.0


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [list(header), *[[_cell(value) for value in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print(
            "  ".join(
                cell.rjust(width) if i else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            )
        )
        if index == 0:
            print("  ".join("-" * width for width in widths))


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return str(value)


def write_results(name: str, results: dict[str, Any]) -> Path:
    """``bench-results/<name>.json`` with the machine the numbers came from."""
    RESULTS.mkdir(exist_ok=True)
    machine = {
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "stack_jvms_quick_start": {server: quick_start_jit(server_pid(server)) for server in ("kafka", "registry")},
    }
    document = {
        "benchmark": name,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine,
        **results,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


@dataclass(frozen=True)
class LegResult:
    """One leg of a benchmark as :func:`write_report` shows it: a rate and the CPU it cost.

    ``group`` sets legs that belong together apart (a QoS, a batch size); ``cpu_us`` is the
    CPU of the thing under test per item; ``extra`` holds the other columns (µs per item of
    the servers, seconds, counts, a yes or no), shown in the table and the JSON but not the chart.
    """

    group: str
    name: str
    per_second: float
    cpu_us: float
    extra: Mapping[str, float | str] = field(default_factory=dict)


def write_report(
    name: str,
    title: str,
    unit: str,
    legs: Sequence[LegResult],
    ratios: Mapping[str, float],
    settings: Mapping[str, Any],
) -> list[Path]:
    """Write ``bench-results/<name>.json``, ``<name>.md`` and ``<name>.png``; return their paths.

    The Markdown holds the table (one row per leg, the ``ratios`` below it) and the machine
    the numbers came from; the chart shows each leg's rate and CPU per ``unit``, grouped.
    """
    document = {
        "title": title,
        "unit": unit,
        "settings": dict(settings),
        "legs": [
            {"group": leg.group, "leg": leg.name, "per_second": round(leg.per_second), "cpu_us": leg.cpu_us}
            | dict(leg.extra)
            for leg in legs
        ],
        "ratio": {key: round(value, 3) for key, value in ratios.items()},
    }
    json_path = write_results(name, document)
    machine = json.loads(json_path.read_text())["machine"]
    md_path = RESULTS / f"{name}.md"
    md_path.write_text(_markdown(title, unit, legs, ratios, settings, machine))
    png_path = RESULTS / f"{name}.png"
    _chart(png_path, title, unit, legs)
    return [json_path, md_path, png_path]


def _markdown(
    title: str,
    unit: str,
    legs: Sequence[LegResult],
    ratios: Mapping[str, float],
    settings: Mapping[str, Any],
    machine: Mapping[str, Any],
) -> str:
    extras = list(dict.fromkeys(key for leg in legs for key in leg.extra))
    header = ["group", "leg", f"{unit}/s", f"CPU µs/{unit}", *extras]
    lines = [f"# {title}", ""]
    lines.append(", ".join(f"{key} {value}" for key, value in settings.items()))
    lines.append("")
    lines.append(f"machine: {', '.join(f'{key} {value}' for key, value in machine.items())}")
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for leg in legs:
        cells = [leg.group, leg.name, _cell(leg.per_second), _cell(leg.cpu_us)]
        cells += [_cell(leg.extra[key]) if key in leg.extra else "" for key in extras]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| ratio | value |", "|---|---|"]
    lines += [f"| {key} | {value:.3f} |" for key, value in ratios.items()]
    return "\n".join(lines) + "\n"


def _chart(path: Path, title: str, unit: str, legs: Sequence[LegResult]) -> None:
    import matplotlib  # only the writer needs it: the scripts start faster without

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{leg.group}: {leg.name}" if leg.group else leg.name for leg in legs]
    groups = list(dict.fromkeys(leg.group for leg in legs))
    colours = [f"C{groups.index(leg.group) % 10}" for leg in legs]
    figure, (rate, cpu) = plt.subplots(1, 2, figsize=(13, 0.45 * len(legs) + 1.8), sharey=True)
    positions = list(range(len(legs)))[::-1]
    rate.barh(positions, [leg.per_second for leg in legs], color=colours)
    rate.set_xlabel(f"{unit}/s (higher is better)")
    cpu.barh(positions, [leg.cpu_us for leg in legs], color=colours)
    cpu.set_xlabel(f"CPU µs per {unit} of the thing under test (lower is better)")
    rate.set_yticks(positions, labels)
    for axis, values in ((rate, [leg.per_second for leg in legs]), (cpu, [leg.cpu_us for leg in legs])):
        for position, value in zip(positions, values, strict=True):
            axis.annotate(_cell(value), (value, position), xytext=(3, 0), textcoords="offset points", va="center")
        axis.margins(x=0.15)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
