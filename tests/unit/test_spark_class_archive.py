"""tools/spark_class_archive.py: the archive it keeps is one the drivers' JVM maps, or it says why not."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from spark_class_archive import QUICK_JIT, check, driver_options, optimising_compiler

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A small dynamic archive holding one class of its own jar, as Spark's hold its jars' classes."""
    folder = tmp_path_factory.mktemp("archive")
    (folder / "Hello.java").write_text("public class Hello { public static void main(String[] a) {} }\n")
    subprocess.run(["javac", "-d", str(folder), str(folder / "Hello.java")], check=True)
    jar = folder / "hello.jar"
    with zipfile.ZipFile(jar, "w") as classes:
        classes.write(folder / "Hello.class", "Hello.class")
    written = folder / "small.jsa"
    subprocess.run(["java", f"-XX:ArchiveClassesAtExit={written}", "-cp", str(jar), "Hello"], check=True)
    return written, str(jar)


def test_an_archive_on_its_own_class_path_passes(archive: tuple[Path, str]) -> None:
    check(*archive)


def test_an_archive_on_another_class_path_fails_naming_it(archive: tuple[Path, str], tmp_path: Path) -> None:
    other = tmp_path / "other.jar"
    other.write_bytes(Path(archive[1]).read_bytes() + b"\0")  # as if pyspark were installed again
    with pytest.raises(SystemExit, match=f"cannot map {archive[0]}"):
        check(archive[0], str(other))


def test_the_drivers_options_name_the_archive_by_its_absolute_path_and_keep_the_jvm_quiet() -> None:
    options = driver_options(Path("driver.jsa")).split()
    assert f"-XX:SharedArchiveFile={Path.cwd() / 'driver.jsa'}" in options  # the drivers' working folders differ
    assert "-XX:TieredStopAtLevel=1" in options
    assert "-Xlog:cds*=off" in options  # a stale archive's warning would land on a service's stdout


def test_the_options_need_no_venv() -> None:
    """``make test`` asks for them with the system's python3, before the venv exists."""
    answer = subprocess.run(
        ["python3", "-I", str(ROOT / "tools/spark_class_archive.py"), "x.jsa", "--options"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    assert answer.stdout.split()[1] == "-XX:SharedArchiveFile=/x.jsa", answer.stderr


def test_the_optimising_compiler_drops_only_the_quick_tier_and_restores_the_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = driver_options(Path("driver.jsa"))
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", options)
    with optimising_compiler():
        within = os.environ["SPARK_SUBMIT_OPTS"]
    assert QUICK_JIT not in within.split()
    assert within.split() == [option for option in options.split() if option != QUICK_JIT]
    assert os.environ["SPARK_SUBMIT_OPTS"] == options


def test_the_optimising_compiler_sets_nothing_where_no_options_were_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    with optimising_compiler():
        assert "SPARK_SUBMIT_OPTS" not in os.environ
    assert "SPARK_SUBMIT_OPTS" not in os.environ
