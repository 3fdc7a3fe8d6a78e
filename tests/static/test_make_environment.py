"""What make's recipes run with. Every Python process of the suite and of ``make run`` starts
from compiled bytecode: ``make install`` compiles what it installs (uv does not unless asked),
and the recipes run without ``PYTHONDONTWRITEBYTECODE``, which our CI machines set, so the
checkout's own modules are cached at their first import too. Without either, each process
compiled every module it imported, at every start. And Maven's short runs start on the JVM's
quick tier (bench/results/2026-12-02-suite-bytecode.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def make(*args: str, env: dict[str, str] | None = None) -> str:
    """make's standard output in the repository root; it must succeed."""
    result = subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_make_install_compiles_every_package_it_installs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # A dry run: the commands the install of a new venv would run, none of them run.
    commands = make("-n", f"VENV={venv}", f"{venv}/.installed").splitlines()
    installs = [line for line in commands if "uv pip install" in line]
    assert len(installs) == 3, commands  # the build tools, the locked dependencies, the checkout's packages
    assert all("--compile-bytecode" in line for line in installs), installs


def test_make_recipes_may_write_bytecode_when_the_environment_says_not_to() -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    probe = f"_bytecode: ; @{sys.executable} -c 'import sys; print(sys.flags.dont_write_bytecode)'"
    assert make("--eval", probe, "_bytecode", env=env).strip() == "0"


def test_maven_starts_on_the_quick_tier_unless_its_options_are_set() -> None:
    probe = '_maven: ; @echo "$$MAVEN_OPTS"'
    unset = {name: value for name, value in os.environ.items() if name != "MAVEN_OPTS"}
    assert "-XX:TieredStopAtLevel=1" in make("--eval", probe, "_maven", env=unset).split()
    assert make("--eval", probe, "_maven", env={**unset, "MAVEN_OPTS": "-Xmx2g"}).strip() == "-Xmx2g"
