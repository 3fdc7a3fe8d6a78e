"""`make test`'s phases run on xdist workers with `--dist loadgroup` and rely on the root
conftest's groups: in the paired phase every ``fixed_names`` test in one group, so that no two
of them (each starts the pipeline on its default ports and topics) ever run at once; in the
parallel phase every ``spark`` test in one lane, and the others by file; in the serial phase
the tests that kill one server in one group. Nothing fails when the
grouping silently stops working: two such tests share ports and topics, and one of them fails
later in a way that points elsewhere (pytest 9.2 with pytest-xdist 3.8 did exactly that:
pytest-dev/pytest-xdist#1386). This runs a real two-worker session of the root conftest."""

from __future__ import annotations

import os
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
MARKERS = "[pytest]\nmarkers =\n    paired\n    fixed_names\n    serial\n    spark\n"

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
    rows = session(tmp_path, ran, "-n", "2", "-m", "paired")
    fixed = [(worker, nodeid) for kind, worker, nodeid in rows if kind == "fixed"]
    assert len(fixed) == 2 and len(rows) == 4, rows
    # One worker, and xdist's own sign that it saw the group: the suffix on the test's id.
    assert len({worker for worker, _ in fixed}) == 1, fixed
    assert all(nodeid.endswith("@fixed-names") for _, nodeid in fixed), fixed
    # The paired phase's other tests are not grouped by file: each is a unit of its own.
    assert all("@" not in nodeid for kind, _, nodeid in rows if kind == "other"), rows


SPARK_TESTS = """
import os
import pytest

def ran(name, request):
    with open({ran!r}, "a") as out:
        out.write(f"{{name}} {{os.environ['PYTEST_XDIST_WORKER']}} {{request.node.nodeid}}\\n")

@pytest.mark.spark
def test_spark_{n}(request): ran("spark", request)

def test_other_{n}(request): ran("other", request)

@pytest.mark.paired
def test_paired_{n}(request): ran("paired", request)
"""


def test_the_parallel_phase_runs_every_spark_test_on_one_worker_and_the_rest_by_file(tmp_path: Path) -> None:
    ran = tmp_path / "ran.txt"
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for n in range(4):
        (tmp_path / f"test_file_{n}.py").write_text(textwrap.dedent(SPARK_TESTS.format(ran=str(ran), n=n)))
    rows = session(tmp_path, ran, "-n", "3", "-m", "not paired and not serial")
    spark = [(worker, nodeid) for kind, worker, nodeid in rows if kind == "spark"]
    assert len(spark) == 4 and len(rows) == 8, rows
    assert len({worker for worker, _ in spark}) == 1, spark
    assert all(nodeid.endswith("@spark-lane") for _, nodeid in spark), spark
    # A file's other tests are one unit, as with --dist loadfile: its module fixtures set up once.
    others = [nodeid for kind, _, nodeid in rows if kind == "other"]
    assert sorted(others) == [f"test_file_{n}.py::test_other_{n}@test_file_{n}.py" for n in range(4)], others


def session(folder: Path, ran: Path, *args: str) -> list[list[str]]:
    """Run a real xdist session of ``folder`` under loadgroup; each test's kind, worker and id."""
    (folder / "pytest.ini").write_text(MARKERS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *args, "--dist", "loadgroup", "-p", "no:cacheprovider", "."],
        cwd=folder, capture_output=True, text=True, timeout=120, env=outside_xdist(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line.split() for line in ran.read_text().splitlines()]


SERIAL_TESTS = """
import os
import pytest

def ran(name, request):
    with open({ran!r}, "a") as out:
        out.write(f"{{name}} {{os.environ.get('PYTEST_XDIST_WORKER', 'main')}} {{request.node.nodeid}}\\n")

@pytest.mark.serial(kills="elasticsearch")
def test_kills_es(request): ran("elasticsearch", request)

@pytest.mark.serial(kills="kafka")
def test_kills_kafka(request): ran("kafka", request)

class Suite:
    @pytest.mark.serial(kills="store")
    def test_kills_its_store(self, request): ran(self.server, request)

class TestCassandra(Suite):
    server = "cassandra"

class TestElasticsearch(Suite):
    server = "elasticsearch"
"""


def test_the_serial_phase_groups_its_tests_by_the_server_they_kill_and_runs_kafkas_apart(tmp_path: Path) -> None:
    ran = tmp_path / "ran.txt"
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_serial.py").write_text(textwrap.dedent(SERIAL_TESTS.format(ran=str(ran))))
    # The Makefile's two serial steps, as it runs them.
    rows = session(tmp_path, ran, "-n", "2", "-m", "serial and not serial(kills='kafka')")
    assert sorted(kind for kind, _, _ in rows) == ["cassandra", "elasticsearch", "elasticsearch"], rows
    elasticsearch = [(worker, nodeid) for kind, worker, nodeid in rows if kind == "elasticsearch"]
    assert len({worker for worker, _ in elasticsearch}) == 1, elasticsearch  # one after another
    assert all(nodeid.endswith("@kills-elasticsearch") for _, nodeid in elasticsearch), elasticsearch
    assert next(nodeid for kind, _, nodeid in rows if kind == "cassandra").endswith("@kills-cassandra"), rows
    ran.unlink()
    assert [(kind, worker) for kind, worker, _ in session(tmp_path, ran, "-m", "serial(kills='kafka')")] == [
        ("kafka", "main")
    ]


def test_a_serial_test_that_does_not_name_the_server_it_kills_is_refused(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text(MARKERS)
    (tmp_path / "test_unnamed.py").write_text("import pytest\n\n@pytest.mark.serial\ndef test_kills(): pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=outside_xdist(),
    )  # fmt: skip
    assert done.returncode != 0
    assert "test_unnamed.py::test_kills: a serial test names the server it kills" in done.stdout + done.stderr


def outside_xdist() -> dict[str, str]:
    """This environment without xdist's variables: under `make test` this test runs in a
    worker, whose PYTEST_XDIST_WORKER a session without workers would otherwise inherit."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST_")}
