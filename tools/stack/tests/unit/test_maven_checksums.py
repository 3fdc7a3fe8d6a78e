"""Every Maven download is checked against the checksum Central publishes beside the file:
each command carries --strict-checksums (Maven 3 only warns on a mismatch without it), and a
mismatch fails at once instead of being tried again as a network failure."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fluxgate_stack import fetch
from fluxgate_stack.errors import InstallError

MISMATCH = (
    "[ERROR] Failed to execute goal on project server-libs: Could not resolve dependencies for project "
    "dev.fluxgate.stack:server-libs:pom:0: Could not transfer artifact org.example:lib:jar:1.0 from/to central "
    "(https://repo.example.org/maven2): Checksum validation failed, expected 9028d591 but is f107291f"
)


def recorded(monkeypatch: pytest.MonkeyPatch, code: int = 0, output: str = "") -> list[list[str]]:
    calls: list[list[str]] = []

    def run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        return subprocess.CompletedProcess(command, code, stdout="", stderr=output)

    monkeypatch.setattr(fetch, "_run", run)
    return calls


def test_every_maven_download_refuses_a_checksum_mismatch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = recorded(monkeypatch)
    fetch.maven_copy_dependencies("mvn", ["org.example:lib:1.0"], tmp_path / "deps", tmp_path / "libs")
    fetch.maven_copy_artifact("mvn", "org.example:app:1.0:tar.gz:all", tmp_path / "one", tmp_path)
    assert len(calls) == 2
    assert all("--strict-checksums" in command for command in calls), calls


def test_a_checksum_mismatch_fails_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The resolver fetched the file twice already; the failure names the file and says why."""
    calls = recorded(monkeypatch, 1, MISMATCH)
    with pytest.raises(InstallError) as failed:
        fetch.maven_copy_dependencies("mvn", ["org.example:lib:1.0"], tmp_path, tmp_path / "libs")
    assert len(calls) == 1
    assert "https://repo.example.org/maven2/org/example/lib/1.0/lib-1.0.jar" in str(failed.value).splitlines()[0]
    assert "Checksum validation failed" in str(failed.value)
