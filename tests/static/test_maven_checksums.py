"""Every Maven download is checked against the checksum published beside the file: the local
stack's fetches (``fluxgate_stack.fetch``) pass --strict-checksums, and every other mvn run
(the aggregator's connectors, in ``make install`` and in its image) finds it in the
repository's ``.mvn/maven.config``. The ``downloads`` tests prove it for real: a repository
serving a jar that does not match its ``.sha1`` is refused, and taken without the flag."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from fluxgate_stack import fetch
from fluxgate_stack.errors import InstallError

ROOT = Path(__file__).resolve().parents[2]
GROUP = "dev.fluxgate.checksumtest"


def test_the_repository_maven_config_refuses_a_mismatch() -> None:
    assert (ROOT / ".mvn" / "maven.config").read_text().split() == ["--strict-checksums"]


def test_the_aggregator_image_resolves_its_connectors_with_that_config() -> None:
    dockerfile = (ROOT / "services/aggregator/Dockerfile").read_text()
    assert "COPY .mvn/maven.config /tmp/prefetch/.mvn/maven.config" in dockerfile
    [resolve] = [line for line in dockerfile.splitlines() if "resolve_jars" in line]
    assert "MAVEN_BASEDIR=/tmp/prefetch " in resolve


def test_make_install_prefetches_the_connectors_with_that_config() -> None:
    [prefetch] = [
        line for line in (ROOT / "Makefile").read_text().splitlines() if "fluxgate-aggregator prefetch" in line
    ]
    assert prefetch.strip().startswith("MAVEN_BASEDIR=$(CURDIR) ")


@pytest.fixture(scope="module")
def local_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway local repository (Maven's plugins downloaded once for the module): the
    tampered artifact must never reach ~/.m2. Each test has its own artifact, refused first,
    so that no test finds another's tampered jar already taken."""
    return tmp_path_factory.mktemp("m2")


@pytest.fixture
def tampered_repository(tmp_path: Path, local_repo: Path, request: pytest.FixtureRequest) -> tuple[Path, Path, str]:
    """A Maven repository whose jar no longer matches its published .sha1 (the pom does), a
    settings file that adds it to every build, the local repository, and the coordinate."""
    group, artifact, version = GROUP, request.node.name.replace("_", "-"), "1.0"
    folder = tmp_path / "remote" / group.replace(".", "/") / artifact / version
    folder.mkdir(parents=True)
    jar = io.BytesIO()
    with zipfile.ZipFile(jar, "w") as zipped:
        zipped.writestr("genuine.txt", "the bytes that were published\n")
    pom = (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></project>\n"
    ).encode()
    for name, data in ((f"{artifact}-{version}.jar", jar.getvalue()), (f"{artifact}-{version}.pom", pom)):
        (folder / name).write_bytes(data)
        (folder / f"{name}.sha1").write_text(hashlib.sha1(data).hexdigest())
    with (folder / f"{artifact}-{version}.jar").open("ab") as served:
        served.write(b"tampered on the way")
    settings = tmp_path / "settings.xml"
    settings.write_text(
        "<settings><profiles><profile><id>tampered</id><activation><activeByDefault>true</activeByDefault></activation>"
        f"<repositories><repository><id>tampered</id><url>{(tmp_path / 'remote').as_uri()}</url></repository>"
        "</repositories></profile></profiles></settings>\n"
    )
    return settings, local_repo, f"{group}:{artifact}:{version}"


def mvn_wrapper(path: Path, settings: Path, local_repo: Path, *, drop: str = "") -> str:
    """An ``mvn`` that reads the settings above and the throwaway local repository, optionally
    without one of the arguments it is given."""
    mvn = shutil.which("mvn")
    assert mvn, "Maven is installed by `make install`"
    path.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do shift; [ "$a" = "{drop}" ] || set -- "$@" "$a"; done\n'
        f'exec {mvn} -s {settings} -Dmaven.repo.local={local_repo} "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


@pytest.mark.downloads
def test_the_stack_fetch_refuses_a_jar_that_does_not_match_its_checksum(
    tampered_repository: tuple[Path, Path, str], tmp_path: Path
) -> None:
    settings, local_repo, coordinate = tampered_repository
    strict = mvn_wrapper(tmp_path / "mvn", settings, local_repo)
    with pytest.raises(InstallError, match="Checksum validation failed"):
        fetch.maven_copy_dependencies(strict, [coordinate], tmp_path / "work", tmp_path / "refused")
    with pytest.raises(InstallError, match="Checksum validation failed"):
        fetch.maven_copy_artifact(strict, f"{coordinate}:jar", tmp_path / "work", tmp_path / "refused")
    assert list(tmp_path.glob("refused/*.jar")) == []
    # The control: the same call without the flag takes the tampered jar (Maven 3 only warns).
    lax = mvn_wrapper(tmp_path / "mvn-lax", settings, local_repo, drop="--strict-checksums")
    fetch.maven_copy_dependencies(lax, [coordinate], tmp_path / "work", tmp_path / "taken")
    assert [jar.name.removesuffix("-1.0.jar") for jar in (tmp_path / "taken").glob("*.jar")] == [
        coordinate.split(":")[1]
    ]


@pytest.mark.downloads
def test_the_maven_config_makes_a_plain_mvn_run_refuse_it(
    tampered_repository: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """What the aggregator's connectors run (``mvn -f <pom> dependency:copy-dependencies``, no
    flag of ours), with MAVEN_BASEDIR naming the checkout as the image and ``make install`` do."""
    settings, local_repo, coordinate = tampered_repository
    project = tmp_path / "connectors"
    project.mkdir()
    (project / "pom.xml").write_text(fetch.maven_pom([coordinate]))
    mvn = mvn_wrapper(tmp_path / "mvn", settings, local_repo)
    command = [mvn, "--batch-mode", "--quiet", "-f", str(project / "pom.xml"), "dependency:copy-dependencies"]
    command += [f"-DoutputDirectory={project / 'jars'}", "-DincludeScope=runtime"]

    def run(basedir: Path | None) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if key != "MAVEN_BASEDIR"}
        env |= {"MAVEN_BASEDIR": str(basedir)} if basedir else {}
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)

    refused = run(ROOT)
    assert refused.returncode != 0 and "Checksum validation failed" in refused.stdout + refused.stderr
    taken = run(None)  # outside the checkout, no .mvn above the pom: Maven 3 only warns
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert [jar.name.removesuffix("-1.0.jar") for jar in (project / "jars").glob("*.jar")] == [coordinate.split(":")[1]]
