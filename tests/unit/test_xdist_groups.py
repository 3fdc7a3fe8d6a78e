"""`make test`'s paired phase runs on two xdist workers (`--dist loadgroup`) and relies on the
root conftest putting every ``fixed_names`` test into one group, so that no two of them (each
starts the pipeline on its default ports and topics) ever run at once. Nothing fails when the
grouping silently stops working: two such tests share ports and topics, and one of them fails
later in a way that points elsewhere (pytest 9.2 with pytest-xdist 3.8 did exactly that:
pytest-dev/pytest-xdist#1386). This runs a real two-worker session of the root conftest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = f"""
import importlib.util

spec = importlib.util.spec_from_file_location("fluxgate_root_conftest", {str(ROOT / "conftest.py")!r})
root = importlib.util.module_from_spec(spec)
spec.loader.exec_module(root)
pytest_collection_modifyitems = root.pytest_collection_modifyitems
"""

TESTS = """
import os
import pytest

def ran(name, request):
    with open({ran!r}, "a") as out:
        out.write(f"{{name}} {{os.environ['PYTEST_XDIST_WORKER']}} {{request.node.nodeid}}\\n")

@pytest.mark.paired
@pytest.mark.fixed_names
def test_first_fixed(request): ran("fixed", request)

@pytest.mark.paired
@pytest.mark.fixed_names
def test_second_fixed(request): ran("fixed", request)

@pytest.mark.paired
def test_first_other(request): ran("other", request)

@pytest.mark.paired
def test_second_other(request): ran("other", request)
"""


def test_the_paired_phase_gives_every_fixed_names_test_to_one_worker(tmp_path: Path) -> None:
    ran = tmp_path / "ran.txt"
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent(TESTS.format(ran=str(ran))))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    paired\n    fixed_names\n")
    session = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert session.returncode == 0, session.stdout[-3000:] + session.stderr[-3000:]
    rows = [line.split() for line in ran.read_text().splitlines()]
    fixed = [(worker, nodeid) for kind, worker, nodeid in rows if kind == "fixed"]
    assert len(fixed) == 2 and len(rows) == 4, rows
    # One worker, and xdist's own sign that it saw the group: the suffix on the test's id.
    assert len({worker for worker, _ in fixed}) == 1, fixed
    assert all(nodeid.endswith("@fixed-names") for _, nodeid in fixed), fixed
