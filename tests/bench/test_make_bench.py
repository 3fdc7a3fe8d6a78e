"""`make bench` runs every line with the stack's JVMs at full JIT."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_line_of_make_bench_asks_for_full_jit(tmp_path: Path) -> None:
    """A bench that starts its own pipeline brings the stack up through ``ensure_up``, which
    restarts a server whose command differs: with the variable set only on the Makefile's
    ``up`` line, the fleet leg (2026-11-28) ran Kafka and the registry C1-only. Make runs each
    recipe line through SHELL: this one only says what it was given."""
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
