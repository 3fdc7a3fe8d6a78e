"""Every install takes its packages from a hashed lock (``make lock``, ``tools/lockfiles.py``):
the locks cover what the pyprojects and ``requirements-dev.txt`` ask for, are not older than
those, hold a hash for every pin, and ``make install`` and every Dockerfile install with
``--require-hashes`` (the local packages alone without, from the checkout, ``--no-deps``)."""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import lockfiles
import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted(ROOT.glob("services/**/Dockerfile"))
# The platforms the locks serve: the images and CI (Linux, CPython 3.11).
LINUX_311 = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
             "platform_system": "Linux", "platform_python_implementation": "CPython",
             "implementation_name": "cpython", "platform_machine": "x86_64", "os_name": "posix"}  # fmt: skip


@dataclass
class Pin:
    version: str
    marker: str | None
    hashes: list[str] = field(default_factory=list)

    def applies(self) -> bool:
        return self.marker is None or Marker(self.marker).evaluate(LINUX_311)


def pins(lock: Path) -> dict[str, list[Pin]]:
    """A lock's pins by canonical name (a universal lock may pin a name twice, under exclusive markers)."""
    found: dict[str, list[Pin]] = {}
    current: Pin | None = None
    for line in lock.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("--hash="):
            assert current is not None, f"{lock.name}: a hash before any pin"
            current.hashes.append(stripped.removeprefix("--hash=").rstrip(" \\"))
            continue
        assert not line[0].isspace() and not stripped.startswith("-"), f"{lock.name}: not a pin: {line!r}"
        requirement, _, marker = stripped.rstrip(" \\").partition(";")
        name, sep, version = requirement.strip().partition("==")
        assert sep, f"{lock.name}: {requirement!r} is not pinned with =="
        current = Pin(version.strip(), marker.strip() or None)
        found.setdefault(canonicalize_name(name), []).append(current)
    return found


def uncovered(requirements: list[str], locked: dict[str, list[Pin]], local: set[str]) -> list[str]:
    """The third-party requirements that no pin of the lock (for Linux, Python 3.11) satisfies."""
    missing = []
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name in local or (requirement.marker and not requirement.marker.evaluate(LINUX_311)):
            continue
        versions = [pin.version for pin in locked.get(name, []) if pin.applies()]
        if not any(requirement.specifier.contains(v, prereleases=True) for v in versions):
            missing.append(f"{text} (locked: {', '.join(versions) or 'nothing'})")
    return missing


def run_commands(dockerfile: Path) -> list[str]:
    """The shell commands of a Dockerfile's RUN steps, continuation lines joined, split at &&."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    runs = [line.strip()[3:] for line in text.splitlines() if line.strip().startswith("RUN ")]
    return [command.strip() for run in runs for command in run.split("&&") if command.strip()]


def pip_installs(commands: list[str]) -> list[list[str]]:
    found = []
    for command in commands:
        if re.match(r"(--mount\S+\s+)*(uv )?pip install\b", command):
            words = shlex.split(command)
            found.append(words[words.index("install") + 1 :])
    return found


def local_packages() -> dict[str, Path]:
    return lockfiles.packages()


def test_every_lock_was_written_from_the_current_inputs() -> None:
    """A pyproject's dependencies, requirements-dev.txt or a Dockerfile's local packages changed
    since the lock was written: ``make lock``."""
    stale = [
        str(lock.path.relative_to(ROOT))
        for lock in lockfiles.locks()
        if not lock.path.exists() or lockfiles.recorded_digest(lock.path) != lock.digest()
    ]
    assert stale == [], f"stale or missing: {stale}; run `make lock`"


def test_every_pin_is_exact_and_hashed() -> None:
    for lock in lockfiles.locks():
        locked = pins(lock.path)
        assert locked, lock.path
        unhashed = [name for name, found in locked.items() for pin in found if not pin.hashes]
        assert unhashed == [], f"{lock.path.relative_to(ROOT)}: no hash for {unhashed}"
        assert not set(locked) & set(local_packages()), "a local package in a lock: it is not on PyPI"


def test_the_dev_lock_covers_requirements_dev_and_every_package() -> None:
    locked = pins(ROOT / "requirements.lock")
    dev = [line.split("#")[0].strip() for line in (ROOT / "requirements-dev.txt").read_text().splitlines()]
    missing = uncovered([r for r in dev if r], locked, set())
    assert missing == [], f"requirements-dev.txt's {missing}; run `make lock`"
    makefile = (ROOT / "Makefile").read_text()
    extras = {
        folder: tuple(extra.split(","))
        for folder, _, extra in re.findall(r"patsubst (\S+),(\S+)\[([\w,]+)\]", makefile)
    }
    assert extras == {k: v for k, v in lockfiles.INSTALL_EXTRAS.items()}, (
        "the Makefile's INSTALL_SPECS and lockfiles.INSTALL_EXTRAS differ"
    )
    missing = {
        str(folder.relative_to(ROOT)): gaps
        for folder in local_packages().values()
        if (
            gaps := uncovered(
                lockfiles.declared(folder, extras.get(str(folder.relative_to(ROOT)), ())), locked, set(local_packages())
            )
        )
    }
    assert missing == {}, f"not in requirements.lock: {missing}; run `make lock`"


def test_the_build_lock_covers_every_build_backend() -> None:
    locked = pins(ROOT / "requirements-build.lock")
    backends = {
        r
        for folder in local_packages().values()
        for r in tomllib.loads((folder / "pyproject.toml").read_text())["build-system"]["requires"]
    }
    assert uncovered(sorted(backends), locked, set()) == []
    assert uncovered(["setuptools", "wheel", "Cython", "editables"], locked, set()) == []


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_each_image_lock_covers_what_its_dockerfile_installs(dockerfile: Path) -> None:
    lock = dockerfile.parent / "requirements.lock"
    installed = lockfiles.installed_by(dockerfile)
    assert installed, f"{dockerfile}: installs no local package from /app"
    closure = lockfiles.local_closure(installed)
    assert sorted(closure) == sorted(installed), "a local package it depends on is not installed by the Dockerfile"
    locked = pins(lock)
    missing = [
        gap
        for folder, extras in closure.items()
        for gap in uncovered(lockfiles.declared(folder, extras), locked, set(local_packages()))
    ]
    assert missing == [], f"not in {lock.relative_to(ROOT)}: {missing}; run `make lock`"
    dev = pins(ROOT / "requirements.lock")
    differ = [
        f"{name}=={pin.version}"
        for name, found in locked.items()
        for pin in found
        if pin.version not in {p.version for p in dev.get(name, [])}
    ]
    assert differ == [], f"{lock.relative_to(ROOT)} pins versions requirements.lock does not: {differ}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_every_pip_install_in_a_dockerfile_requires_hashes(dockerfile: Path) -> None:
    """From a lock with --require-hashes (the build tools first), or the checkout's own packages
    with --no-deps; every build without isolation (an isolated build downloads its backend unpinned)."""
    installs = pip_installs(run_commands(dockerfile))
    assert len(installs) >= 3, installs  # the build tools, the dependencies, the local packages
    folder = dockerfile.parent.relative_to(ROOT)
    assert installs[0][-2:] == ["-r", "/app/requirements-build.lock"] and "--require-hashes" in installs[0]
    assert any(args[-2:] == ["-r", f"/app/{folder}/requirements.lock"] for args in installs)
    copies = {line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("COPY ")}
    assert {"requirements-build.lock", f"{folder}/requirements.lock"} <= copies
    for args in installs:
        if "-r" in args:
            assert "--require-hashes" in args and "--no-deps" in args, args
        else:
            assert "--no-deps" in args, args
            paths = [a for a in args if not a.startswith("-")]
            assert paths and all(re.fullmatch(r"/app/[\w./-]+(\[[\w,]+\])?", p) for p in paths), args
        if args != installs[0]:
            assert "--no-build-isolation" in args, args


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_uv_installs_as_pip_would_into_the_images_python_compiled_with_no_cache_and_is_removed(
    dockerfile: Path,
) -> None:
    """As pip does there: into the Python the entrypoints run (the official image's is no virtual
    environment, so uv is told which), each module compiled (the images set PYTHONDONTWRITEBYTECODE,
    so a module not compiled now would be compiled at every start), no cache in a layer, the
    proxy's CA and a mirror's index from the pip.conf secret, and uv itself gone from the image
    once the locks are in."""
    commands = run_commands(dockerfile)
    uv_installs = [shlex.split(c) for c in commands if re.match(r"(--mount\S+\s+)*uv pip install\b", c)]
    assert uv_installs, f"{dockerfile}: the dependency lock is installed with uv"
    for words in uv_installs:
        assert words[words.index("--python") + 1] == "/usr/local/bin/python" and "--compile-bytecode" in words, words
    assert re.search(r"^\s+UV_NO_CACHE=1 \\$", dockerfile.read_text(), re.MULTILINE), "UV_NO_CACHE=1 in the ENV"
    assert any(re.fullmatch(r"pip uninstall -y .*\buv\b.*", c) for c in commands), "uv is uninstalled"
    # What the pip.conf secret gives pip (tools/images.py, deploy/README.md), uv gets before it downloads.
    first = next(i for i, c in enumerate(commands) if c.startswith("uv pip install"))
    assert "if [ -f /run/secrets/ca.crt ]; then export SSL_CERT_FILE=/run/secrets/ca.crt; fi" in commands[:first]
    index = (
        'if index="$(pip config --global get global.index-url 2>/dev/null)"; then export UV_DEFAULT_INDEX="$index"; fi'
    )
    assert index in commands[:first], "a mirror's index-url from the pip.conf secret"


def test_make_install_installs_from_the_locks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("$(VENV)/.installed:") :].split("\n\n")[0]
    variables = dict(re.findall(r"^(\w+) :?= (.*)$", makefile, re.MULTILINE))
    lines = [line.strip().replace("$(UV_INSTALL)", variables["UV_INSTALL"]) for line in recipe.splitlines()]
    installs = [line for line in lines if "uv pip install" in line]
    assert installs[0].endswith("--require-hashes --no-deps -r requirements-build.lock")
    assert installs[1].endswith("--require-hashes --no-deps --no-build-isolation -r requirements.lock")
    assert len(installs) == 3 and "--no-deps --no-build-isolation $(addprefix -e ,$(INSTALL_SPECS))" in installs[2]
    assert "requirements-dev.txt" not in recipe
