"""Benchmarks measure the stack's JVMs at full JIT, run by ``make bench`` or by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# Appended, not first: bench/ has an elasticsearch.py, which must never shadow the library.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import _common

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = "FLUXGATE_STACK_JVM_QUICK_START"


@pytest.fixture(autouse=True)
def _no_leak() -> Iterator[None]:
    """What full_jit sets must not outlive the test: a worker that went on with the variable
    set asked the shared stack for full JIT and restarted Cassandra under another worker's test
    (a fresh-clone run, 2026-11-28). Torn down after monkeypatch, which this does not request."""
    before = os.environ.get(VARIABLE)
    yield
    assert os.environ.get(VARIABLE) == before


def without_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable unset for the test, and as it was after: delenv alone records nothing for a
    variable that is absent, and would leave what the code under test sets."""
    monkeypatch.setenv(VARIABLE, "")
    monkeypatch.delenv(VARIABLE)


def test_every_line_of_make_bench_asks_for_full_jit(tmp_path: Path) -> None:
    """A bench that starts its own pipeline brings the stack up through ``ensure_up``, which
    restarts a server whose command differs: with the variable set only on the Makefile's
    ``up`` line, the fleet leg (2026-11-28) ran every Java server of the stack C1-only. Make
    runs each recipe line through SHELL: this one only says what it was given."""
    shell = tmp_path / "shell"
    shell.write_text('#!/bin/sh\necho "jit=${FLUXGATE_STACK_JVM_QUICK_START-unset}"\n')
    shell.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUXGATE_STACK_", "MAKE"))}
    result = subprocess.run(
        ["make", "--always-make", "--silent", "--no-print-directory", "-C", str(ROOT), "bench", f"SHELL={shell}"],
        capture_output=True, text=True, env=env, check=True, timeout=60,
    )  # fmt: skip
    lines = result.stdout.split()
    assert len(lines) > 10, result.stdout
    assert set(lines) == {"jit=false"}, result.stdout


class StackSeen:
    """Stands in for ``fluxgate_stack.Stack``: remembers the variable when it is built."""

    seen: list[str | None] = []

    def __init__(self) -> None:
        StackSeen.seen.append(os.environ.get(VARIABLE))

    def status(self) -> list[Any]:
        return []

    def up(self, names: list[str]) -> str:
        return f"up {names}"


def test_a_bench_run_by_hand_brings_the_stack_up_at_full_jit(monkeypatch: pytest.MonkeyPatch) -> None:
    without_variable(monkeypatch)
    monkeypatch.setattr(_common, "Stack", StackSeen)
    StackSeen.seen = []
    assert _common.stack_up(("kafka",)) == "up ['kafka']"
    assert StackSeen.seen == ["false"]


def test_a_choice_made_before_the_bench_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, "true")  # setenv records the value before: undone after the test
    monkeypatch.setattr(_common, "Stack", StackSeen)
    StackSeen.seen = []
    _common.stack_up()
    assert StackSeen.seen == ["true"]


class Prepared(Exception):
    """Raised by the stand-in for ``prepare``, the first thing that reaches the stack."""


@pytest.mark.parametrize("name", ["fleet", "pipeline"])
def test_the_benches_that_start_a_pipeline_ask_for_full_jit_before_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module: ModuleType = __import__(name)
    without_variable(monkeypatch)
    monkeypatch.setattr(sys, "argv", [f"{name}.py"])
    seen: list[str | None] = []

    def prepare(*_: Any) -> None:
        seen.append(os.environ.get(VARIABLE))
        raise Prepared

    monkeypatch.setattr(module, "prepare", prepare)
    with pytest.raises(Prepared):
        module.main()
    assert seen == ["false"]
