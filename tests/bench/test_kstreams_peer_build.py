"""The Kafka Streams peer of ``bench/aggregator.py`` builds from its Maven project alone and
its jar runs: the topology it prints is the one the comparison claims (dedupe in a
persistent window store before the windowed aggregation, emitted on window close).

A copy of the project is built in a temporary folder, so the test neither needs nor touches
``bench/kstreams/target``. With a warm ``~/.m2`` it takes well under a minute; from a cold
one Maven downloads Kafka Streams, Avro and the plugins first, hence its own time bound."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "bench" / "kstreams"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # make install brings both: a machine without them is a broken install, not a reason to skip.
    assert shutil.which("mvn") and shutil.which("java"), "mvn and java missing: run make install"
    project = tmp_path_factory.mktemp("kstreams-peer")
    shutil.copy(PEER / "pom.xml", project)
    shutil.copytree(PEER / "src", project / "src")
    subprocess.run(["mvn", "-B", "-q", "--strict-checksums", "package"], cwd=project, check=True, timeout=840)
    return project / "target" / "kstreams-peer.jar"


def test_the_peer_builds_into_one_runnable_jar(jar: Path) -> None:
    described = subprocess.run(
        ["java", "-jar", str(jar), "--describe", "yes", "--bootstrap", "unused:9092", "--registry", "http://unused",
         "--input", "in", "--output", "out", "--application-id", "describe",
         "--reading-schema", str(ROOT / "schemas/sensor_reading.avsc"),
         "--aggregate-schema", str(ROOT / "schemas/temperature_aggregate.avsc")],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "Source: KSTREAM-SOURCE" in described and "topics: [in]" in described
    assert "stores: [dedupe]" in described
    assert "KSTREAM-AGGREGATE" in described and "stores: [windows]" in described
    assert "topic: out" in described
    # Copies go before the windows: the dedupe processor comes first in the one sub-topology.
    assert described.index("stores: [dedupe]") < described.index("stores: [windows]")
