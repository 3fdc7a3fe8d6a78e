"""Getting server files onto the machine: Debian packages and Maven Central artifacts.

Maven keeps its own cache in ~/.m2, so a second install of the same version is a copy;
our install folders are filled in a temporary folder and renamed into place, so an
interrupted install never looks finished.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from xml.sax.saxutils import escape

from fluxgate_stack.errors import InstallError

# Pinned so resolution does not depend on whatever Maven picks for the bare prefix.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# For single archives: 3.x insists on reading the artifact's pom and its parent, and
# apicurio-registry-app 3.0.9's parent pom was never published to Central; 2.8 (Maven
# 3.8's default binding) copies the file without reading any pom.
COPY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:2.8"
# Every Maven call: batch mode, and a file whose .sha1 (published beside it on Central) does
# not match is refused rather than warned about (Maven 3's default; Maven 4's is to refuse).
# The repository's .mvn/maven.config says the same to every other mvn run in the checkout.
MAVEN_FLAGS = ("-q", "-B", "--strict-checksums")
# Daemons such as mosquitto live in sbin, which a non-root PATH often lacks.
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
# A download step that failed on the network is tried again this many times in all, after
# waiting RETRY_WAIT_S, then twice that, ...; an artifact or package that does not exist is not.
ATTEMPTS = 3
RETRY_WAIT_S = 2.0
# What Maven (resolver) and apt print when the network, not the request, failed.
TRANSIENT = re.compile(
    r"Could not transfer|Connection (reset|refused|timed out)|Read timed out|timed out|Temporary failure"
    r"|Network is unreachable|No route to host|Unable to connect|status code: 5\d\d|\b50[234]\b",
    re.IGNORECASE,
)
# A file that does not match its published checksum: the resolver already fetched it twice.
CHECKSUM_MISMATCH = re.compile(r"Checksum validation failed", re.IGNORECASE)
URL = re.compile(r"https?://[^\s()\"'<>]+")
# "Could not transfer artifact g:a:ext[:classifier]:v from/to central (https://…/maven2): …"
MAVEN_ARTIFACT = re.compile(r"Could not (?:transfer|find) artifact (\S+) (?:from/to|in) \S+ \((https?://[^)\s]+)\)")


def find_binary(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN_DIRS))


def ensure_debian_packages(binaries: dict[str, str]) -> None:
    """apt-get install the packages (values) whose binaries (keys) are missing."""
    missing = sorted({package for binary, package in binaries.items() if find_binary(binary) is None})
    if not missing:
        return
    prefix = _root_prefix(missing)
    install = [*prefix, "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    if _run(install).returncode != 0:
        # A fresh machine has empty package lists: refresh once, then retry.
        _run_with_retries([*prefix, "apt-get", "update", "-q"], "apt-get update")
        _run_with_retries(install, f"apt-get install {' '.join(missing)}")


def maven_pom(coordinates: Iterable[str]) -> str:
    """A throw-away pom whose only purpose is to list ``group:artifact:version`` dependencies."""
    deps = []
    for coordinate in coordinates:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"    <dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>dev.fluxgate.stack</groupId><artifactId>server-libs</artifactId><version>0</version>\n"
        "  <packaging>pom</packaging>\n"
        "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n"
    )


def maven_copy_dependencies(mvn: str, coordinates: list[str], work_dir: Path, out_dir: Path) -> None:
    """Resolve ``coordinates`` with their runtime dependencies and copy every jar into ``out_dir``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "pom.xml").write_text(maven_pom(coordinates))
    goal = f"{DEPENDENCY_PLUGIN}:copy-dependencies"
    command = [mvn, *MAVEN_FLAGS, goal, "-DincludeScope=runtime", f"-DoutputDirectory={out_dir}"]
    _run_with_retries(command, f"mvn copy-dependencies {' '.join(coordinates)}", cwd=work_dir)


def maven_copy_artifact(mvn: str, coordinate: str, work_dir: Path, out_dir: Path) -> Path:
    """Fetch one artifact (``g:a:v:type[:classifier]``) without dependencies; returns the file."""
    work_dir.mkdir(parents=True, exist_ok=True)
    command = [mvn, *MAVEN_FLAGS, f"{COPY_PLUGIN}:copy", f"-Dartifact={coordinate}", f"-DoutputDirectory={out_dir}"]
    _run_with_retries(command, f"mvn copy {coordinate}", cwd=work_dir)
    _group, artifact, version, kind, *classifier = coordinate.split(":")
    return out_dir / ("-".join([artifact, version, *classifier]) + f".{kind}")


def unpack_tar(archive: Path, out_dir: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(out_dir, filter="data")  # "data" refuses absolute paths and links out of out_dir


def unpack_zip(archive: Path, out_dir: Path, *, strip_top_folder: bool = False) -> None:
    """Unpack ``archive`` keeping Unix permission bits (``zipfile`` alone drops them, and with
    them the executable bit of every launcher script)."""
    with zipfile.ZipFile(archive) as zipped:
        for info in zipped.infolist():
            name = PurePosixPath(info.filename)
            parts = name.parts[1:] if strip_top_folder else name.parts
            mode = info.external_attr >> 16
            if not parts or info.is_dir():
                continue
            if stat.S_ISLNK(mode) or ".." in parts or name.is_absolute():
                raise InstallError(f"{archive.name}: refusing entry {info.filename!r} (link or outside the folder)")
            target = out_dir.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(info) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink)
            target.chmod((mode & 0o777) or 0o644)


def install_atomically(target: Path, fill: Callable[[Path], None]) -> None:
    """Run ``fill(tmp_dir)`` and move the result to ``target``; ``target`` appears complete or not at all."""
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fill(tmp)
    tmp.rename(target)


def _root_prefix(packages: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo"):
        return ["sudo", "-n"]
    raise InstallError(f"need root to install {' '.join(packages)}: run  sudo apt-get install -y {' '.join(packages)}")


def _run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise InstallError(f"{command[0]} is not installed (needed for: {' '.join(command)})") from exc


def _run_with_retries(
    command: list[str], what: str, cwd: Path | None = None, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Run a download step; again after a growing wait when it failed on the network."""
    for attempt in range(1, ATTEMPTS + 1):
        result = _run(command, cwd=cwd)
        if result.returncode == 0:
            return
        output = result.stdout + result.stderr
        if attempt == ATTEMPTS or not TRANSIENT.search(output) or CHECKSUM_MISMATCH.search(output):
            break
        sleep(RETRY_WAIT_S * 2 ** (attempt - 1))
    raise InstallError(failure(what, result.returncode, output, attempt))


def failure(what: str, code: int, output: str, attempts: int) -> str:
    """One line that says what failed and which URL, then the end of the tool's output."""
    urls = list(dict.fromkeys([*_artifact_urls(output), *URL.findall(output)]))
    where = f": {', '.join(urls[:3])}" if urls else ""
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    lines = output.strip().splitlines()[-30:]
    return f"{what} failed (exit {code}){tries}{where}\n" + "\n".join(lines)


def _artifact_urls(output: str) -> list[str]:
    """The file URLs of the artifacts Maven names as failed (it prints only the repository)."""
    urls = []
    for coordinate, repository in MAVEN_ARTIFACT.findall(output):
        parts = coordinate.split(":")
        if len(parts) not in (4, 5):
            continue
        group, artifact, ext, *classifier, version = parts
        name = "-".join([artifact, version, *classifier]) + f".{ext}"
        urls.append(f"{repository.rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/{name}")
    return urls
