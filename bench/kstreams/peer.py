"""The Kafka Streams peer of the aggregator's job, as ``bench/aggregator.py``'s ``kstreams`` leg
starts it: the jar built from this folder (Maven), one JVM of its own per run, followed
through the progress lines it prints, its CPU and peak memory read from /proc.

Imported as ``kstreams.peer`` by the scripts in ``bench/`` (that folder is first on
``sys.path`` when they run).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
JAR = HERE / "target" / "kstreams-peer.jar"
SCHEMAS = HERE.parents[1] / "schemas"
# Spark's local-mode JVM runs with its default driver memory, a 1 GiB heap; the peer gets the same cap.
HEAP = "1g"


def build_jar(quiet: bool = True) -> Path:
    """The peer's shaded jar, built by Maven when it is missing or older than its sources."""
    sources = [HERE / "pom.xml", *(HERE / "src").rglob("*.java")]
    if JAR.is_file() and JAR.stat().st_mtime >= max(path.stat().st_mtime for path in sources):
        return JAR
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SystemExit("mvn is not installed (make install brings it)")
    # --strict-checksums as the repository's .mvn/maven.config asks of every Maven download.
    argv = [mvn, "-B", "--strict-checksums", *(["-q"] if quiet else []), "-f", str(HERE / "pom.xml"), "package"]
    subprocess.run(argv, check=True, timeout=900)
    return JAR


@dataclass(frozen=True)
class Progress:
    """One line the peer printed: counters since it started, at ``at`` (epoch seconds)."""

    at: float
    read: int
    counted: int
    duplicates: int
    emitted: int


@dataclass
class PeerProcess:
    """The peer JVM: started with ``start()``, followed in a thread, stopped with ``stop()``."""

    bootstrap: str
    registry_url: str
    input_topic: str
    output_topic: str
    state_dir: Path
    threads: int = 2
    commit_ms: int = 1000
    # Look for closed windows on every record that moves the close time (Kafka's internal
    # emit interval; its 1 s default leaves the last windows of a finite input unemitted when
    # the records after their close take under a second, as a 50,000-reading run showed).
    emit_interval_ms: int = 0
    progress: list[Progress] = field(default_factory=list)
    states: list[tuple[float, str]] = field(default_factory=list)
    started: float = 0.0
    _process: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None, "start() first"
        return self._process.pid

    def argv(self) -> list[str]:
        options = {
            "bootstrap": self.bootstrap,
            "registry": self.registry_url,
            "input": self.input_topic,
            "output": self.output_topic,
            "application-id": f"bench-kstreams-{self.output_topic}",
            "state-dir": str(self.state_dir),
            "reading-schema": str(SCHEMAS / "sensor_reading.avsc"),
            "aggregate-schema": str(SCHEMAS / "temperature_aggregate.avsc"),
            "threads": str(self.threads),
            "commit-ms": str(self.commit_ms),
            "emit-interval-ms": str(self.emit_interval_ms),
        }
        flags = [item for name, value in options.items() for item in (f"--{name}", value)]
        return ["java", f"-Xmx{HEAP}", "-jar", str(build_jar()), *flags]

    def start(self) -> PeerProcess:
        self.started = time.time()
        self._process = subprocess.Popen(
            self.argv(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )
        self._reader = threading.Thread(target=self._follow, name="kstreams-peer", daemon=True)
        self._reader.start()
        return self

    def _follow(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            parts = line.split()
            if len(parts) == 6 and parts[0] == "progress":
                at, *counts = (int(part) for part in parts[1:])
                self.progress.append(Progress(at / 1000, *counts))
            elif len(parts) == 2 and parts[0] == "state":
                self.states.append((time.time(), parts[1]))

    def latest(self) -> Progress:
        return self.progress[-1] if self.progress else Progress(self.started, 0, 0, 0, 0)

    def wait_for(self, read: int, timeout: float) -> Progress:
        """Block until the peer has read ``read`` records; its last progress line then."""
        deadline = time.monotonic() + timeout
        while self.latest().read < read:
            self._check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"kstreams peer read {self.latest().read} of {read} records in {timeout:.0f}s")
            time.sleep(0.05)
        return self.latest()

    def wait_emitted(self, expected: int | None, settle: float, timeout: float) -> int:
        """Block until ``expected`` windows are out (or, unknown, no new one for ``settle`` s)."""
        deadline = time.monotonic() + timeout
        last, since = self.latest().emitted, time.monotonic()
        while time.monotonic() < deadline:
            emitted = self.latest().emitted
            if expected is not None and emitted >= expected:
                return emitted
            if emitted != last:
                last, since = emitted, time.monotonic()
            elif expected is None and time.monotonic() - since >= settle:
                return emitted
            self._check_alive()
            time.sleep(0.05)
        return self.latest().emitted

    def _check_alive(self) -> None:
        assert self._process is not None
        if self._process.poll() is not None:
            raise SystemExit(f"kstreams peer exited with {self._process.returncode}; states {self.states}")

    def peak_rss_mib(self) -> float:
        """VmHWM of the JVM, while it still runs."""
        return peak_rss_mib([self.pid])

    def stop(self) -> None:
        """SIGTERM (a clean close of the streams), then SIGKILL after 30 s."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._reader is not None:
            self._reader.join(5)


def steady_span(progress: Sequence[Progress], skip: int, total: int) -> tuple[float, float, int]:
    """From the first line with ``skip`` records read to the first with ``total``: the
    instants and the records read in between (the job's leg likewise leaves out its first
    micro-batch, which pays for start-up)."""
    begin = next(p for p in progress if p.read >= min(skip, total))
    end = next(p for p in progress if p.read >= total)
    if end is begin:  # everything in one line: the whole run is all there is
        begin = progress[0]
    return begin.at, end.at, end.read - begin.read


def reset_peak_rss(pids: Iterable[int]) -> None:
    """Start each process's VmHWM afresh at its current RSS (``clear_refs`` 5), so a long-lived
    JVM's peak is that of the leg that follows."""
    for pid in pids:
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_mib(pids: Iterable[int]) -> float:
    total_kib = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total_kib += int(line.split()[1])
    return round(total_kib / 1024, 1)


Window = tuple[str, int]
Figures = tuple[int, float, float, float, float]  # count, min, max, mean, stddev


def windows_of(records: Iterable[Mapping[str, Any]]) -> dict[Window, Figures]:
    """(device, window start in epoch ms) -> figures, from decoded TemperatureAggregates."""
    out: dict[Window, Figures] = {}
    for record in records:
        start = record["window_start"]
        start_ms = int(start.timestamp() * 1000) if hasattr(start, "timestamp") else int(start)
        figures = (int(record["count"]), record["min"], record["max"], record["mean"], record["stddev"])
        out[(record["device_id"], start_ms)] = figures
    return out


def compare_windows(ours: Mapping[Window, Figures], theirs: Mapping[Window, Figures]) -> dict[str, Any]:
    """Whether both sides closed the same windows with equal count, min and max, and mean and
    stddev equal up to summation order (relative 1e-9)."""
    common = ours.keys() & theirs.keys()
    differing = [
        window
        for window in sorted(common)
        if ours[window][:3] != theirs[window][:3]
        or not all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
            for a, b in zip(ours[window][3:], theirs[window][3:], strict=True)
        )
    ]
    return {
        "windows_job": len(ours),
        "windows_kstreams": len(theirs),
        "only_job": len(ours.keys() - theirs.keys()),
        "only_kstreams": len(theirs.keys() - ours.keys()),
        "differing": len(differing),
        "first_differing": [list(window) for window in differing[:3]],
        "equal": bool(ours) and ours.keys() == theirs.keys() and not differing,
    }


def percentile(ordered: Sequence[float], p: float) -> float:
    """The nearest-rank percentile of sorted values (``bench/pipeline.py``'s)."""
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


@dataclass
class PeerLeg:
    """One run of the peer over the input topic, as ``bench/aggregator.py`` reports a leg."""

    name: str
    what: str
    rows: int
    steady_rows: int
    steady_seconds: float
    steady_cpu: float
    wall: float
    first_s: float  # from the JVM's start to the steady span's (start-up and the first records)
    peak_mib: float
    output_rows: int
    output_topic: str
    steady_jit: float = 0.0  # of steady_cpu, the JVM's JIT compiler threads'

    @property
    def per_second(self) -> float:
        return self.steady_rows / self.steady_seconds if self.steady_seconds > 0 else 0.0


def run_peer_leg(name: str, peer: PeerProcess, count: int, skip: int, windows: int | None) -> PeerLeg:
    """Start the peer, wait until it has read ``count`` records and emitted ``windows`` (or
    gone quiet), and measure it: CPU and rate over the records after the first ``skip``."""
    from _common import CpuSampler  # bench/ is first on the path of the scripts that import this

    started = time.perf_counter()
    peer.start()
    try:
        with CpuSampler([peer.pid], jit=[peer.pid]) as sampler:
            peer.wait_for(count, timeout=max(600.0, count / 1000))
            wall = time.perf_counter() - started
            emitted = peer.wait_emitted(windows, settle=3.0, timeout=30.0)
        begin, end, rows = steady_span(peer.progress, skip, count)
        peak = peer.peak_rss_mib()
    finally:
        peer.stop()
    what = (
        f"Kafka Streams peer (bench/kstreams, {peer.threads} threads, commit {peer.commit_ms} ms, "
        f"emit on close every {peer.emit_interval_ms} ms, -Xmx{HEAP}); {emitted} aggregates out"
    )
    return PeerLeg(name, what, count, rows, end - begin, sampler.used(begin, end), wall, begin - peer.started,
                   peak, emitted, peer.output_topic, sampler.jit_used(begin, end))  # fmt: skip


def read_topic(bootstrap: str, topic: str, partitions: int, decode: Any, timeout: float = 60.0) -> list[Any]:
    """Every record in ``topic`` right now, decoded, read from the beginning (nothing committed)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-read", "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        left = {p for p, end in ends.items() if end > 0}
        out = []
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error():
                    continue
                out.append(decode(message.value()))
                partition, offset = message.partition() or 0, message.offset() or 0
                if offset + 1 >= ends[partition]:
                    left.discard(partition)
        return out
    finally:
        consumer.close()
