"""The benches' count of a JVM's JIT compilation CPU (``_common.CompilerTime``), on a /proc
tree laid out as the kernel's: the figure a leg's CPU net of compiling is computed with."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

# Appended, not first: bench/ has an elasticsearch.py (see test_aggregator_vs_kstreams.py).
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from _common import TICKS_PER_SECOND, CompilerTime


def thread(proc: Path, pid: int, tid: int, name: str, ticks: int) -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True, exist_ok=True)
    (task / "comm").write_text(name + "\n")
    # Fields after the command: state, then 10 more, then utime and stime (both ticks / 2).
    (task / "stat").write_text(f"{tid} ({name}) S" + " 0" * 10 + f" {ticks // 2} {ticks - ticks // 2}" + " 0" * 30)


def test_only_the_compiler_threads_count(tmp_path: Path) -> None:
    thread(tmp_path, 7, 7, "java", 1000)
    thread(tmp_path, 7, 20, "C2 CompilerThre", 300)
    thread(tmp_path, 7, 21, "C1 CompilerThre", 100)
    thread(tmp_path, 7, 22, "GC Thread#0", 500)
    assert CompilerTime(tmp_path).sample([7]) == pytest.approx(400 / TICKS_PER_SECOND)


def test_a_compiler_thread_that_ended_keeps_its_time_and_a_new_one_adds(tmp_path: Path) -> None:
    compilers = CompilerTime(tmp_path)
    thread(tmp_path, 7, 20, "C2 CompilerThre", 300)
    thread(tmp_path, 7, 21, "C2 CompilerThre", 100)
    assert compilers.sample([7]) == pytest.approx(400 / TICKS_PER_SECOND)
    shutil.rmtree(tmp_path / "7" / "task" / "21")  # HotSpot ended an idle compiler thread
    thread(tmp_path, 7, 20, "C2 CompilerThre", 350)
    thread(tmp_path, 7, 23, "C2 CompilerThre", 50)
    assert compilers.sample([7]) == pytest.approx(500 / TICKS_PER_SECOND)


def test_a_jvm_that_is_gone_adds_nothing(tmp_path: Path) -> None:
    assert CompilerTime(tmp_path).sample([99]) == 0.0
