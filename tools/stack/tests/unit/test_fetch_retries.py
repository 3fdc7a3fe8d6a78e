"""Download steps: tried again after a growing wait when the network failed, at once an
error when the artifact does not exist, and the failure names the URL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fluxgate_stack import fetch
from fluxgate_stack.errors import InstallError

RESET = (
    "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-dependency-plugin:2.8:copy (default-cli): "
    "Could not transfer artifact org.elasticsearch.distribution.integ-test-zip:elasticsearch:zip:8.19.7 "
    "from/to central (https://repo.example.org/maven2): Connection reset"
)
MISSING = "[ERROR] Could not find artifact org.example:nothing:jar:1.0 in central (https://repo.example.org/maven2)"


def scripted(monkeypatch: pytest.MonkeyPatch, *outcomes: tuple[int, str]) -> list[list[str]]:
    calls: list[list[str]] = []
    left = list(outcomes)

    def run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        code, output = left.pop(0)
        return subprocess.CompletedProcess(command, code, stdout="", stderr=output)

    monkeypatch.setattr(fetch, "_run", run)
    return calls


def test_a_transient_failure_is_tried_again_after_a_growing_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scripted(monkeypatch, (1, RESET), (1, RESET), (0, ""))
    waits: list[float] = []
    fetch._run_with_retries(["mvn", "copy"], "mvn copy es", sleep=waits.append)
    assert len(calls) == 3
    assert waits == [fetch.RETRY_WAIT_S, 2 * fetch.RETRY_WAIT_S]


def test_the_last_failure_names_the_file_url_maven_did_not_print(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, *[(1, RESET)] * fetch.ATTEMPTS)
    with pytest.raises(InstallError) as failed:
        fetch._run_with_retries(["mvn", "copy"], "mvn copy es", sleep=lambda _: None)
    first = str(failed.value).splitlines()[0]
    folder = "https://repo.example.org/maven2/org/elasticsearch/distribution/integ-test-zip/elasticsearch/8.19.7"
    url = f"{folder}/elasticsearch-8.19.7.zip"
    assert first.startswith(f"mvn copy es failed (exit 1) after {fetch.ATTEMPTS} attempts: {url}")
    assert "Connection reset" in str(failed.value)  # the tool's own words follow


def test_a_missing_artifact_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scripted(monkeypatch, (1, MISSING))
    with pytest.raises(InstallError, match=r"^mvn copy nothing failed \(exit 1\): https://repo.example.org/maven2/"
                       r"org/example/nothing/1.0/nothing-1.0.jar"):  # fmt: skip
        fetch._run_with_retries(["mvn", "copy"], "mvn copy nothing", sleep=lambda _: pytest.fail("waited"))
    assert len(calls) == 1


def test_apt_failures_on_the_network_are_transient_too() -> None:
    assert fetch.TRANSIENT.search("Err:1 http://deb.example.org bookworm InRelease\n  Temporary failure resolving")
    assert fetch.TRANSIENT.search("E: Failed to fetch http://deb.example.org/x.deb  503  Service Unavailable")
    assert not fetch.TRANSIENT.search("E: Unable to locate package no-such-package")
