"""``make lock``: the hashed lock files every install reads, written by ``uv pip compile``.

Three kinds, each pinning exact versions with the sha256 of every file PyPI has for them, so
that an install with ``--require-hashes`` takes nothing else:

- ``requirements.lock``: what ``make install`` puts into ``.venv``: ``requirements-dev.txt``
  and the third-party dependencies of every package (with the extras ``make install`` asks
  for), for Python 3.11 on any platform (``--universal``).
- ``requirements-build.lock``: what builds the rest: the packages' build backend (each
  pyproject's ``[build-system] requires``) and what the locked source distributions build
  with (pyspark and DTLSSocket ship no wheel), and uv, which the images install their
  dependency locks with. Installed first, so that every later install
  runs with ``--no-build-isolation`` and never downloads an unpinned build tool.
- ``services/**/requirements.lock``: one per image, beside its Dockerfile: the third-party
  dependencies of the local packages that Dockerfile installs (its ``pip install --no-deps``
  of ``/app/...`` paths), at the versions of ``requirements.lock`` (passed as constraints).

The local packages themselves are never in a lock (they are not on PyPI: a lookup by their
name there could find someone else's package); they are installed from the checkout with
``--no-deps`` after the locked set. Each lock's third line records a digest of its inputs;
``tests/static/test_locks.py`` fails when an input changed and ``make lock`` was not run.

    python tools/lockfiles.py            # write every lock (keeps the versions they pin)
    python tools/lockfiles.py --upgrade  # newest versions the pyprojects allow
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV_LOCK = ROOT / "requirements.lock"
BUILD_LOCK = ROOT / "requirements-build.lock"
DEV_REQUIREMENTS = ROOT / "requirements-dev.txt"
# What else builds run with: the locked source distributions, pyspark (a setup.py: setuptools
# and wheel) and DTLSSocket (Cython, setuptools, wheel), and hatchling's editable installs
# (editables, which hatchling asks for only then). A build that needs more fails under
# --no-build-isolation, naming the missing module: add it here. And uv, which installs each
# image's dependency lock: the same files and hashes as pip, for about half pip's CPU.
EXTRA_BUILD_TOOLS = ("setuptools", "wheel", "Cython", "editables", "uv")
# make install's extras (the Makefile's INSTALL_SPECS): coap-ingest's DTLS support.
INSTALL_EXTRAS = {"services/coap-ingest": ("dtls",)}
UV_OPTIONS = ("--generate-hashes", "--universal", "--python-version", "3.11", "--quiet")
DIGEST_LINE = "# make lock inputs: sha256:"
# A local package in a Dockerfile's install: "/app/<folder>" or "/app/<folder>[extra,...]".
APP_PATH = re.compile(r"""["']?/app/((?:libs|services|tools)/[\w./-]+?)(?:\[([\w,-]+)\])?["']?(?=\s|$)""")


@dataclass
class Lock:
    """One lock file and what it is compiled from."""

    path: Path
    lines: list[str]  # the requirements uv reads (from stdin)
    constraints: Path | None = None
    digest_of: list[str] = field(default_factory=list)  # what makes it stale when it changes

    def digest(self) -> str:
        text = "\n".join([*UV_OPTIONS, *self.lines, *self.digest_of])
        return hashlib.sha256(text.encode()).hexdigest()


def packages() -> dict[str, Path]:
    """Every local package, by its distribution name, and its folder."""
    found = {}
    for pyproject in sorted(ROOT.glob("*/*/pyproject.toml")) + sorted(
        ROOT.glob("services/persisters/*/pyproject.toml")
    ):
        found[canonical(tomllib.loads(pyproject.read_text())["project"]["name"])] = pyproject.parent
    return found


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"not a requirement: {requirement!r}")
    return canonical(match.group(1))


def project(folder: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    return project


def declared(folder: Path, extras: tuple[str, ...] = ()) -> list[str]:
    """The requirements a package declares: its dependencies and those of the given extras."""
    spec = project(folder)
    optional: dict[str, list[str]] = spec.get("optional-dependencies", {})  # type: ignore[assignment]
    return [*spec.get("dependencies", []), *(r for extra in extras for r in optional[extra])]  # type: ignore[misc]


def local_closure(roots: dict[Path, tuple[str, ...]]) -> dict[Path, tuple[str, ...]]:
    """The given local packages (folder: extras) and every local package they depend on."""
    local = packages()
    closure = dict(roots)
    pending = list(roots)
    while pending:
        folder = pending.pop()
        for requirement in declared(folder, closure[folder]):
            name = requirement_name(requirement)
            if name in local and local[name] not in closure:
                closure[local[name]] = ()
                pending.append(local[name])
    return closure


def installed_by(dockerfile: Path) -> dict[Path, tuple[str, ...]]:
    """The local packages (folder: extras) a Dockerfile installs, from its ``/app/...`` paths."""
    found: dict[Path, tuple[str, ...]] = {}
    for line in dockerfile.read_text().splitlines():
        if "pip install" not in line and not line.strip().startswith("/app/"):
            continue
        for match in APP_PATH.finditer(line):
            folder = ROOT / match.group(1)
            if (folder / "pyproject.toml").exists():
                found[folder] = tuple(match.group(2).split(",")) if match.group(2) else ()
    return found


def dockerfiles() -> list[Path]:
    return sorted(ROOT.glob("services/**/Dockerfile"))


def image_lock(dockerfile: Path) -> Path:
    return dockerfile.parent / "requirements.lock"


def editable(folder: Path, extras: tuple[str, ...]) -> str:
    return f"-e ./{folder.relative_to(ROOT)}" + (f"[{','.join(extras)}]" if extras else "")


def package_inputs(closure: dict[Path, tuple[str, ...]]) -> tuple[list[str], list[str]]:
    """uv's input lines for a set of local packages, and what of them a change makes stale."""
    lines = [editable(folder, extras) for folder, extras in sorted(closure.items())]
    digest_of = [
        f"{folder.relative_to(ROOT)}: {requirement}"
        for folder, extras in sorted(closure.items())
        for requirement in declared(folder, extras)
    ]
    return lines, digest_of


def locks() -> list[Lock]:
    """Every lock, in the order they are written (the dev lock first: the others are constrained by it)."""
    everything = local_closure(
        {folder: INSTALL_EXTRAS.get(str(folder.relative_to(ROOT)), ()) for folder in packages().values()}
    )
    lines, digest_of = package_inputs(everything)
    dev = Lock(DEV_LOCK, ["-r requirements-dev.txt", *lines], None, [DEV_REQUIREMENTS.read_text(), *digest_of])
    backends = sorted(
        {
            r
            for folder in packages().values()
            for r in tomllib.loads((folder / "pyproject.toml").read_text())["build-system"]["requires"]
        }
    )
    build = Lock(BUILD_LOCK, [*backends, *EXTRA_BUILD_TOOLS], DEV_LOCK)
    images = []
    for dockerfile in dockerfiles():
        lines, digest_of = package_inputs(local_closure(installed_by(dockerfile)))
        images.append(Lock(image_lock(dockerfile), lines, DEV_LOCK, digest_of))
    return [dev, build, *images]


def recorded_digest(lock: Path) -> str | None:
    for line in lock.read_text().splitlines()[:5]:
        if line.startswith(DIGEST_LINE):
            return line.removeprefix(DIGEST_LINE).strip()
    return None


def compile_lock(lock: Lock, upgrade: bool) -> None:
    uv = shlex.split(os.environ.get("UV", f"{sys.executable} -m uv"))
    # No index URL in the lock: the index stays the client's (a mirror's URL does not belong there).
    command = [*uv, "pip", "compile", *UV_OPTIONS, "--custom-compile-command", "make lock"]
    command += [arg for name in packages() for arg in ("--no-emit-package", name)]
    if lock.constraints:
        command += ["-c", str(lock.constraints.relative_to(ROOT))]
    if upgrade:
        command.append("--upgrade")
    command += ["-o", str(lock.path.relative_to(ROOT)), "-"]
    result = subprocess.run(
        command, cwd=ROOT, input="\n".join(lock.lines) + "\n", text=True, capture_output=True, check=False
    )
    if result.returncode:
        raise SystemExit(f"uv pip compile for {lock.path.relative_to(ROOT)} failed:\n{result.stderr}")
    text = lock.path.read_text().splitlines()
    # uv's two header lines, then the digest, then the pins.
    text = [line for line in text if not line.startswith(DIGEST_LINE)]
    text.insert(2, DIGEST_LINE + lock.digest())
    lock.path.write_text("\n".join(text) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--upgrade",
        action="store_true",
        help="the newest versions the pyprojects allow (the image locks follow the dev lock)",
    )
    options = parser.parse_args(argv)
    for lock in locks():
        print(f"lock={lock.path.relative_to(ROOT)} event=compiling", flush=True)
        compile_lock(lock, options.upgrade)
    return 0


if __name__ == "__main__":
    sys.exit(main())
