"""The driver's heap: the setting, else what the container's memory limit leaves, read from
cgroup v1 and v2 files as a container sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluxgate_aggregator.driver_heap import GIB, container_memory_limit, driver_heap
from fluxgate_aggregator.settings import SparkSettings
from fluxgate_aggregator.spark import heap_of


def cgroups(tmp_path: Path, own: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup mount at ``tmp_path/cg`` holding ``files`` and a /proc/self/cgroup of ``own``."""
    root = tmp_path / "cg"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    (tmp_path / "self-cgroup").write_text(own)
    return root, tmp_path / "self-cgroup"


def test_a_cgroup_v2_container_reads_its_own_memory_max(tmp_path: Path) -> None:
    root, own = cgroups(tmp_path, "0::/\n", {"memory.max": str(3 * GIB)})
    assert container_memory_limit(root, own) == 3 * GIB


def test_a_v2_process_in_a_nested_cgroup_reads_that_cgroups_limit_first(tmp_path: Path) -> None:
    root, own = cgroups(tmp_path, "0::/kubepods/pod1/c1\n",
                        {"memory.max": "max", "kubepods/pod1/c1/memory.max": str(24 * GIB)})  # fmt: skip
    assert container_memory_limit(root, own) == 24 * GIB


def test_a_cgroup_v1_container_reads_limit_in_bytes(tmp_path: Path) -> None:
    own = "4:memory:/libpod_parent/libpod-abc\n3:cpu,cpuacct:/libpod_parent/libpod-abc\n0::/\n"
    root, own_file = cgroups(tmp_path, own, {"memory/memory.limit_in_bytes": str(3 * GIB)})
    assert container_memory_limit(root, own_file) == 3 * GIB


@pytest.mark.parametrize(
    ("own", "files"),
    [
        ("0::/\n", {"memory.max": "max"}),
        ("4:memory:/\n0::/\n", {"memory/memory.limit_in_bytes": "9223372036854771712"}),  # v1's "no limit"
        ("0::/\n", {}),  # nothing readable
    ],
)
def test_no_limit_is_none(tmp_path: Path, own: str, files: dict[str, str]) -> None:
    root, own_file = cgroups(tmp_path, own, files)
    assert container_memory_limit(root, own_file) is None


@pytest.mark.parametrize(
    ("limit", "memory"),
    [
        (3 * GIB, "1536m"),  # the aggregator chart's default limit: 1.5 GiB kept
        (24 * GIB, "19660m"),  # Hive's sizing: a fifth kept
        (int(2.4 * GIB), None),  # under 1 GiB left: Spark's 1g
        (None, None),
    ],
)
def test_the_heap_is_the_limit_less_its_reserve(limit: int | None, memory: str | None) -> None:
    assert driver_heap(None, limit).memory == memory


def test_the_setting_wins_over_the_limit_and_spark_conf_over_both(monkeypatch: pytest.MonkeyPatch) -> None:
    assert driver_heap("6g", 24 * GIB).memory == "6g"
    monkeypatch.setattr("fluxgate_aggregator.spark.container_memory_limit", lambda: 24 * GIB)
    assert heap_of(SparkSettings(driver_memory="6g")).memory == "6g"
    assert heap_of(SparkSettings()).memory == "19660m"
    named = heap_of(SparkSettings(driver_memory="6g", conf={"spark.driver.memory": "8g"}))
    assert (named.memory, named.source) == ("8g", "spark.conf")
