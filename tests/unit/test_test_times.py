"""tools/test_times.py: the seconds of each test file and package, from pytest's JUnit XML."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_times import TICKS_PER_S, cpu_by_kind, load_over, main, package_of, phase_window, read_load, seconds_by_file

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="services.aggregator.tests.integration.test_cli" name="test_a" time="10.5"/>
  <testcase classname="services.aggregator.tests.integration.test_cli" name="test_b" time="2.0"/>
  <testcase classname="services.persisters.scylla.tests.integration.test_suite.TestScyllaSinkSuite"
            name="test_c" time="3.0"/>
  <testcase classname="tests.e2e.test_soak" name="test_d" time="600"/>
  <testcase classname="tests.e2e.test_soak" name="test_skipped"/>
</testsuite></testsuites>
"""


def test_seconds_add_up_per_file_with_the_class_left_out(tmp_path: Path) -> None:
    junit = tmp_path / "parallel.xml"
    junit.write_text(JUNIT)
    assert seconds_by_file(junit) == {
        "services/aggregator/tests/integration/test_cli.py": 12.5,
        "services/persisters/scylla/tests/integration/test_suite.py": 3.0,
        "tests/e2e/test_soak.py": 600.0,
    }


def test_a_file_belongs_to_the_folder_above_its_tests_folder() -> None:
    assert package_of("services/persisters/scylla/tests/integration/test_suite.py") == "services/persisters/scylla"
    assert package_of("tests/e2e/test_soak.py") == "tests"


def test_the_report_lists_the_slowest_package_and_file_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "parallel.xml"
    junit.write_text(JUNIT)
    assert main([str(junit), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "616 s in 3 files" in out
    assert out.index("600 s  tests\n") < out.index("by file:") < out.index("600 s  tests/e2e/test_soak.py")
    assert "aggregator" not in out  # --top 1


def test_a_phase_that_did_not_run_is_said(tmp_path: Path) -> None:
    assert main([str(tmp_path / "serial.xml")]) == 1


def test_the_load_over_a_phase_is_its_cores_busy_share_and_its_most_memory_in_use(tmp_path: Path) -> None:
    junit = tmp_path / "parallel.xml"
    junit.write_text(JUNIT.replace('name="pytest"', 'name="pytest" timestamp="2026-11-29T04:00:00+00:00" time="20"'))
    start, end = phase_window(junit)
    assert (start, end) == (1795924800.0, 1795924820.0)
    gib = 1024 * 1024
    log = tmp_path / "load.log"
    log.write_text(
        f"{start - 5:.0f} 0 100 {24 * gib} {20 * gib}\n"  # before the phase: left out
        f"{start:.0f} 100 200 {24 * gib} {20 * gib}\n"
        f"{start + 10:.0f} 250 400 {24 * gib} {14 * gib}\n"
        f"{end:.0f} 400 600 {24 * gib} {16 * gib}\n"
        f"{end + 5:.0f} 400 700 {24 * gib} {2 * gib}\n"  # after it: left out
        f"{end + 6:.0f} 40"  # cut short when the logger stopped
    )
    assert load_over(read_load(log), start, end) == (
        "load: cores 75% busy over 20 s, at most 10.0 of 24.0 GiB of memory in use"
    )
    assert load_over(read_load(log), end + 1, end + 9) == "load: fewer than two samples inside the phase"


def test_the_report_says_the_load_when_given_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "parallel.xml"
    junit.write_text(JUNIT.replace('name="pytest"', 'name="pytest" timestamp="2026-11-29T04:00:00" time="20"'))
    start, end = phase_window(junit)  # no offset: the machine's local time
    log = tmp_path / "load.log"
    log.write_text(f"{start:.0f} 0 100 2048 1024\n{end:.0f} 50 200 2048 1024\n")
    assert main([str(junit), "--load", str(log)]) == 0
    out = capsys.readouterr().out
    assert "load: cores 50% busy over 20 s" in out
    assert "cpu by process" not in out  # no <log>.kinds beside it
    (tmp_path / "load.log.kinds").write_text(f"{start + 1:.0f} kafka {3 * TICKS_PER_S}\n")
    assert main([str(junit), "--load", str(log)]) == 0
    assert "3 CPU-s  100%  kafka" in capsys.readouterr().out


def test_the_cpu_of_each_kind_inside_a_phase_most_first(tmp_path: Path) -> None:
    kinds = tmp_path / "load.log.kinds"
    hz = TICKS_PER_S
    kinds.write_text(
        f"99 spark {50 * hz}\n"  # before the phase
        f"100 spark {30 * hz}\n100 kafka {10 * hz}\n"
        f"110 pytest-worker {40 * hz}\n110 spark {30 * hz}\n"
        f"121 kafka {99 * hz}\n"  # after it
    )
    assert cpu_by_kind(kinds, 100, 120, top=2).splitlines() == [
        "cpu by process: 110 CPU-s in the processes seen",
        "      60 CPU-s   55%  spark",
        "      40 CPU-s   36%  pytest-worker",
    ]
