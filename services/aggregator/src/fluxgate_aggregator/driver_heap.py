"""The heap of a driver JVM the job starts itself: its setting, else what the container's memory
limit leaves, else Spark's own 1 GiB.

In local mode, a pod's default, every task runs in the driver's JVM, so its heap holds the
job's whole state. Spark's launcher always hands that JVM ``-Xmx`` from ``spark.driver.memory``
(1g unless set), so the JVM's own container sizing (``MaxRAMPercentage``) never applies: a
pod given 24 GiB ran the job in 1 GiB. There the collector's work grew with the fleet: full
collections took 152 to 282 wall µs of a reading's 1,181 to 1,345 from 100,000 to a million
devices, and a 2 GiB heap took 8.7% off a reading at 300,000
(bench/results/2026-12-01-aggregator-cold-devices.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GIB = 1 << 30
MIB = 1 << 20
# What a limit keeps outside the heap: the JVM's own memory (metaspace, generated code, thread
# stacks, direct buffers, the collector's tables) and the Python driver. The whole job less its
# heap was 0.86 to 0.90 GiB at its peak with 1 and 2 GiB heaps at 300,000 devices (fleet
# leg); 1.5 GiB or a fifth of the limit leaves room above that, as the JVM's structures grow
# with the heap.
RESERVE_MIN = 3 * GIB // 2
RESERVE_SHARE = 0.2
# Below this the job keeps Spark's own default: a smaller heap would not hold its state.
SPARK_DEFAULT = GIB
# cgroup v1 reports "no limit" as the largest page-aligned value of a 64-bit counter.
UNLIMITED_V1 = 1 << 62


@dataclass(frozen=True)
class DriverHeap:
    """``spark.driver.memory`` for the driver (None: Spark's default) and where it came from."""

    memory: str | None
    source: str


def driver_heap(setting: str | None, limit: int | None) -> DriverHeap:
    """The setting when given, else the heap ``limit`` bytes leave once the reserve is kept."""
    if setting:
        return DriverHeap(setting, "spark.driver_memory")
    if limit is None:
        return DriverHeap(None, "no container memory limit: Spark's default 1g")
    heap = limit - max(RESERVE_MIN, int(limit * RESERVE_SHARE))
    described = f"the container's memory limit, {limit / GIB:.1f} GiB"
    if heap < SPARK_DEFAULT:
        return DriverHeap(None, f"{described}, leaves less than 1 GiB: Spark's default 1g")
    return DriverHeap(f"{heap // MIB}m", described)


def container_memory_limit(
    cgroup_root: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")
) -> int | None:
    """This process's cgroup memory limit in bytes (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), or None where there is none or it cannot be read. The
    process's own cgroup is looked up first, then the mount's root: a container with a cgroup
    namespace of its own sees its cgroup as the root."""
    for folder, name in _candidates(cgroup_root, own):
        try:
            text = (folder / name).read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= UNLIMITED_V1:
            return None
        return int(text)
    return None


def _candidates(cgroup_root: Path, own: Path) -> list[tuple[Path, str]]:
    """The files that may hold the limit, most specific first."""
    try:
        lines = own.read_text().splitlines()
    except OSError:
        lines = []
    found: list[tuple[Path, str]] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2's one hierarchy
            found.append((cgroup_root / path.lstrip("/"), "memory.max"))
        elif "memory" in controllers.split(","):
            found.append((cgroup_root / "memory" / path.lstrip("/"), "memory.limit_in_bytes"))
    return [*found, (cgroup_root, "memory.max"), (cgroup_root / "memory", "memory.limit_in_bytes")]
