"""tools/test_times.py: the seconds of each test file and package, from pytest's JUnit XML."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_times import main, package_of, seconds_by_file

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
