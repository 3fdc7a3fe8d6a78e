"""The Kafka and Avro connectors' jars, resolved by Maven rather than Spark's Ivy.

Why not ``spark.jars.packages``: Spark's Ivy resolver also asks for each module's
``-tests.jar``, and some Maven Central mirrors do not carry those (nor, for some
releases, ``spark-token-provider-kafka``), so the job would not start. Maven
honours scopes, caches in ``~/.m2`` and works behind the same mirrors; the jars it
copies are handed to Spark as plain files (``spark.jars``). On a cluster you can
still use ``--packages`` (see the README); ``FLUXGATE_AGG_SPARK__PACKAGES`` does the same.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pyspark

from fluxgate_core.errors import FluxgateError

ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-avro_2.13")
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.fluxgate</groupId><artifactId>aggregator-connectors</artifactId><version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = """
    <dependency><groupId>org.apache.spark</groupId><artifactId>{artifact}</artifactId><version>{version}</version></dependency>"""


_VERSIONED = re.compile(r"^(.*?)-\d+(?:\.\d+)+")


class ConnectorError(FluxgateError):
    """The connectors could not be resolved; the message says what Maven printed."""


def packages(version: str = pyspark.__version__) -> str:
    """The same connectors as Maven coordinates, for ``--packages`` on a cluster."""
    return ",".join(f"org.apache.spark:{artifact}:{version}" for artifact in ARTIFACTS)


def resolve_jars(cache_dir: Path, version: str = pyspark.__version__) -> list[Path]:
    """The connector jars (and their runtime dependencies pyspark lacks), downloading once."""
    target = cache_dir / version
    marker = target / ".complete"
    if not marker.exists():
        _download(target, version)
        marker.touch()
    return sorted(target.glob("*.jar"))


def _download(target: Path, version: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorError(
            "Maven (mvn) is needed to fetch the Spark Kafka/Avro connectors; install it or set spark.packages"
        )
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    dependencies = "".join(_DEPENDENCY.format(artifact=a, version=version) for a in ARTIFACTS)
    (target / "pom.xml").write_text(_POM.format(version=version, dependencies=dependencies))
    command = [
        mvn,
        "--batch-mode",
        "--quiet",
        "--strict-checksums",  # Maven 3.8 only warns when a jar does not match Central's published checksum
        "-f",
        str(target / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={target}",
        "-DincludeScope=runtime",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = result.stdout[-2000:] + result.stderr[-2000:]
        raise ConnectorError(f"mvn could not resolve {packages(version)}:\n{output}")
    _drop_bundled(target)


def _drop_bundled(target: Path) -> None:
    """Remove jars pyspark already ships (another version of them would shadow Spark's own)."""
    bundled = {_artifact_name(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in target.glob("*.jar"):
        if _artifact_name(jar) in bundled:
            jar.unlink()


def _artifact_name(jar: Path) -> str:
    """``kafka-clients-3.9.1.jar`` -> ``kafka-clients``: the name before the first ``-<n>.<n>``
    (``spark-sql-kafka-0-10_2.13-4.1.1`` keeps its ``-0-10_2.13``)."""
    match = _VERSIONED.match(jar.stem)
    return match.group(1) if match else jar.stem
