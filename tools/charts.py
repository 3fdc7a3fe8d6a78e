"""Fluxgate's Helm charts (`deploy/charts`): helm itself, the charts with their
dependencies, and what they render.

helm is built from the Go module proxy (`go install`) into `.local/bin` the first time
it is needed; Go's module and build caches make later runs take a second. The service
charts depend on the library chart and the umbrella chart on the service charts, all as
`file://` dependencies: `build` packages them in that order (`make charts` does it in
place; the tests do it in a copy of their own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHARTS = ROOT / "deploy" / "charts"
HELM_VERSION = "v3.19.5"
LOCAL_BIN = ROOT / ".local" / "bin"  # the Go-built tools (helm, compose-check)
HELM = LOCAL_BIN / "helm"
GO_TARBALL = "/usr/local/go/bin/go"
LIBRARY = "fluxgate-lib"
UMBRELLA = "fluxgate"
SERVICES = (
    "mqtt-proxy",
    "coap-ingest",
    "aggregator",
    "es-persister",
    "scylla-persister",
    "hazelcast-persister",
    "device-status",
    "console",
)
Values = Path | dict[str, Any]


def go_binary(purpose: str) -> str:
    """The ``go`` command: on PATH, else Go's own tarball install (not on every PATH).
    ``purpose`` completes the error's "Go 1.24+ is needed to ..."."""
    go = shutil.which("go") or (GO_TARBALL if Path(GO_TARBALL).exists() else None)
    if go is None:
        raise RuntimeError(f"Go 1.24+ is needed to {purpose} (Debian: apt-get install golang-go)")
    return go


def helm() -> Path:
    """``.local/bin/helm`` at HELM_VERSION, built first if it is missing or another version."""
    go = go_binary("build helm")
    if HELM.exists() and built_version(go, HELM) == HELM_VERSION:
        return HELM
    HELM.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [go, "install", f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
        env={**os.environ, "GOBIN": str(HELM.parent), "CGO_ENABLED": "0"},
        check=True,
        timeout=1800,
    )
    return HELM


def built_version(go: str, binary: Path) -> str:
    """The helm module version a binary was built from (``helm version`` says only v3.19
    when built by ``go install``, without the release's linker flags)."""
    info = subprocess.run([go, "version", "-m", str(binary)], capture_output=True, text=True, check=False).stdout
    mod = [line.split() for line in info.splitlines() if line.split()[:2] == ["mod", "helm.sh/helm/v3"]]
    return mod[0][2] if mod else ""


def build(where: Path = CHARTS) -> Path:
    """Every chart under ``where`` with its dependencies packaged: the service charts
    (each needs the library), then the umbrella (needs them)."""
    for chart in (*SERVICES, UMBRELLA):
        subprocess.run(
            [str(helm()), "dependency", "build", "--skip-refresh", str(where / chart)],
            check=True,
            capture_output=True,
            timeout=120,
        )
    return where


def copy_built(dest: Path) -> Path:
    """A copy of deploy/charts at ``dest`` with its dependencies built (the repository's stays as it is)."""
    shutil.copytree(CHARTS, dest, ignore=shutil.ignore_patterns("charts", "Chart.lock"), dirs_exist_ok=True)
    # The ignore above also skipped the top folder's children named "charts": none exist by design.
    return build(dest)


def helm_args(values: Sequence[Values], folder: Path) -> list[str]:
    """``-f`` options for value files and dicts (written beside each other in ``folder``)."""
    args: list[str] = []
    for number, item in enumerate(values):
        if isinstance(item, dict):
            path = folder / f"values-{number}.yaml"
            path.write_text(yaml.safe_dump(item))
            item = path
        args += ["-f", str(item)]
    return args


def template(chart: Path, release: str = "fluxgate", values: Sequence[Values] = (), namespace: str = "fluxgate") -> str:
    """``helm template``'s output; raises with helm's message when the chart refuses the values."""
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run(
            [str(helm()), "template", release, str(chart), "--namespace", namespace,
             *helm_args(values, Path(folder))],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    if result.returncode:
        raise ChartError(result.stderr.strip())
    return result.stdout


def render(
    chart: Path, release: str = "fluxgate", values: Sequence[Values] = (), namespace: str = "fluxgate"
) -> list[dict[str, Any]]:
    """Every object ``helm template`` renders."""
    return [doc for doc in yaml.safe_load_all(template(chart, release, values, namespace)) if doc]


def lint(chart: Path, values: Sequence[Values] = ()) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as folder:
        return subprocess.run(
            [str(helm()), "lint", "--strict", str(chart), *helm_args(values, Path(folder))],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


class ChartError(Exception):
    """helm refused to render (a chart's `fail`, a template error): its message."""


if __name__ == "__main__":
    if sys.argv[1:] == ["helm"]:  # `make install`: the tests render charts, the build is not a test's to time
        print(f"{helm()} {HELM_VERSION}")
    elif sys.argv[1:] == ["build"]:
        build()
        print(f"{HELM} {HELM_VERSION}; dependencies built under {CHARTS}/*/charts")
    else:
        sys.exit("usage: charts.py helm | build   (helm alone, or helm then deploy/charts' dependencies in place)")
