"""The libraries that parse what devices send are at versions with their known CVEs fixed:
every pyproject that names one allows no older version, and every lock pins a fixed one.
The hostile suite (``fluxgate_testing.hostile``, its deep cases) shows what the fixes are for."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
# The first version with every known CVE fixed, and which.
FIXED = {
    # CVE-2024-26134 (a crash decoding a crafted object, fixed in 5.6.2); CVE-2026-26209
    # (uncontrolled recursion on ~100,000 nested arrays, fixed in 5.9.0, which added max_depth:
    # the payload parser passes it, so an older cbor2 fails every CBOR case of the hostile suite).
    "cbor2": Version("5.9.0"),
    # CVE-2024-27454: orjson.loads without a recursion limit (fixed in 3.9.15). The Hazelcast
    # persister only writes with it; named here so that no pyproject lets an older one in.
    "orjson": Version("3.9.15"),
}
PYPROJECTS = sorted(ROOT.glob("*/*/pyproject.toml")) + sorted(ROOT.glob("services/persisters/*/pyproject.toml"))
LOCKS = [ROOT / "requirements.lock", *sorted(ROOT.glob("services/**/requirements.lock"))]


def floor(requirement: Requirement) -> Version | None:
    bounds = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=", "===")]
    bounds += [Version(s.version) for s in requirement.specifier if s.operator == ">"]
    return max(bounds, default=None)


def test_every_pyproject_allows_only_fixed_versions() -> None:
    found, unsafe = [], []
    for pyproject in PYPROJECTS:
        project = tomllib.loads(pyproject.read_text())["project"]
        requirements = [
            *project.get("dependencies", []),
            *(r for group in project.get("optional-dependencies", {}).values() for r in group),
        ]
        for requirement in map(Requirement, requirements):
            name = canonicalize_name(requirement.name)
            if name in FIXED:
                found.append(name)
                lowest = floor(requirement)
                if lowest is None or lowest < FIXED[name]:
                    unsafe.append(f"{pyproject.relative_to(ROOT)}: {requirement} (fixed in {FIXED[name]})")
    assert set(found) == set(FIXED), "a library of FIXED is no longer named: drop it here"
    assert unsafe == []


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_lock_pins_a_fixed_version(lock: Path) -> None:
    pins = {}
    for line in lock.read_text().splitlines():
        name, sep, rest = line.partition("==")
        if sep and not line.startswith((" ", "#")):
            pins[canonicalize_name(name)] = Version(rest.split()[0])
    old = {name: str(pins[name]) for name in FIXED if name in pins and pins[name] < FIXED[name]}
    assert old == {}
