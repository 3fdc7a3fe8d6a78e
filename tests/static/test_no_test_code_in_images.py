"""Test code stays out of what the images install: no runtime package imports a test library
or the shared test helpers (``libs/fluxgate-testing``), no Dockerfile copies those, and the
build context (the repository root) leaves every tests folder out, since the Dockerfiles copy
each service's whole folder."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = [*ROOT.glob("libs/fluxgate-core/src"), *ROOT.glob("libs/fluxgate-sink/src"), *ROOT.glob("services/**/src")]
TEST_ONLY = re.compile(r"^\s*(import|from)\s+(pytest|pact|hypothesis|fluxgate_testing)\b", re.MULTILINE)


def test_no_runtime_module_imports_test_code() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
        for folder in RUNTIME
        for path in folder.rglob("*.py")
        for match in TEST_ONLY.finditer(path.read_text())
    ]
    assert RUNTIME and found == []


def test_no_image_installs_the_test_helpers() -> None:
    dockerfiles = sorted(ROOT.glob("services/**/Dockerfile"))
    assert len(dockerfiles) == 8
    assert [str(p.relative_to(ROOT)) for p in dockerfiles if "fluxgate-testing" in p.read_text()] == []


def test_the_build_context_leaves_the_tests_out() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip()}
    assert {"**/tests", "libs/fluxgate-testing", "contracts-tests", "bench"} <= ignored
