"""Fluxgate's Helm charts (`deploy/charts`): helm itself, the charts with their
dependencies, and what they render.

helm is built from the Go module proxy (`go install`) into `.local/bin` the first time
it is needed; Go's module and build caches make later runs take a second. The service
charts depend on the library chart and the umbrella chart on the service charts, all as
`file://` dependencies: `build` packages them in that order (`make charts` does it in
place; the tests do it in a copy of their own). `package` writes every chart as a versioned
archive, ready for `helm push` to an OCI registry (`make charts-package`: `.local/charts/`).
`install_dry_run` runs `helm install --dry-run=client` without a cluster, NOTES included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHARTS = ROOT / "deploy" / "charts"
HELM_VERSION = "v3.19.5"
LOCAL_BIN = ROOT / ".local" / "bin"  # the Go-built tools (helm, compose-check)
HELM = LOCAL_BIN / "helm"
PACKAGED = ROOT / ".local" / "charts"  # `make charts-package`: every chart's archive
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


# Kubernetes' quantity suffixes for bytes (binary and decimal).
QUANTITY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def memory_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (``3Gi``, ``256Mi``, ``1G``, ``1048576``) in bytes."""
    for suffix, factor in QUANTITY.items():
        if quantity.endswith(suffix):
            return int(float(quantity.removesuffix(suffix)) * factor)
    return int(quantity)


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


def version(chart: Path) -> str:
    """The chart's version, from its Chart.yaml."""
    return str(yaml.safe_load((chart / "Chart.yaml").read_text())["version"])


def package(dest: Path = PACKAGED) -> list[Path]:
    """Every chart as ``<name>-<version>.tgz`` in ``dest`` (the library, each service chart
    with the library inside, the umbrella with the service charts), built from a copy."""
    dest.mkdir(parents=True, exist_ok=True)
    archives = []
    with tempfile.TemporaryDirectory() as folder:
        built = copy_built(Path(folder) / "charts")
        for name in (LIBRARY, *SERVICES, UMBRELLA):
            subprocess.run(
                [str(helm()), "package", str(built / name), "--destination", str(dest)],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            archives.append(dest / f"{name}-{version(built / name)}.tgz")
    return archives


class Installed(NamedTuple):
    """What ``helm install --dry-run=client`` shows: the manifest and the chart's NOTES."""

    manifest: str
    notes: str


class _Discovery(BaseHTTPRequestHandler):
    """A stand-in Kubernetes API server: only discovery (a version, the core group)."""

    ANSWERS: dict[str, Any] = {
        "/version": {"major": "1", "minor": "33", "gitVersion": "v1.33.0"},
        "/api": {"kind": "APIVersions", "versions": ["v1"]},
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
    }

    def do_GET(self) -> None:
        answer = self.ANSWERS.get(self.path.split("?", 1)[0])
        body = json.dumps(answer or {"kind": "Status", "code": 404}).encode()
        self.send_response(200 if answer else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def offline_cluster() -> Iterator[dict[str, str]]:
    """The environment in which ``helm install --dry-run=client`` runs without a cluster:
    its kubeconfig names a stand-in that answers discovery alone (helm asks the version
    first, even for a client-side dry run), and releases are kept in memory."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discovery)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            kubeconfig, releases = Path(folder) / "kubeconfig", Path(folder) / "releases.yaml"
            kubeconfig.write_text(
                yaml.safe_dump({
                    "apiVersion": "v1", "kind": "Config", "current-context": "offline",
                    "clusters": [{"name": "offline", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
                    "contexts": [{"name": "offline", "context": {"cluster": "offline", "user": "offline"}}],
                    "users": [{"name": "offline", "user": {}}],
                })
            )  # fmt: skip
            releases.write_text("")
            yield {"KUBECONFIG": str(kubeconfig), "HELM_DRIVER": "memory", "HELM_MEMORY_DRIVER_DATA": str(releases)}
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def install_dry_run(
    chart: Path, release: str = "fluxgate", values: Sequence[Values] = (), namespace: str = "fluxgate"
) -> Installed:
    """``helm install --dry-run=client``'s manifest and NOTES; raises with helm's message
    when the chart refuses the values (its schema, a template's ``fail``)."""
    with tempfile.TemporaryDirectory() as folder, offline_cluster() as env:
        result = subprocess.run(
            [str(helm()), "install", release, str(chart), "--namespace", namespace, "--dry-run=client",
             "--output", "json", *helm_args(values, Path(folder))],
            capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **env},
        )  # fmt: skip
    if result.returncode:
        raise ChartError(result.stderr.strip())
    installed = json.loads(result.stdout)
    return Installed(installed.get("manifest", ""), installed.get("info", {}).get("notes", ""))


class ChartError(Exception):
    """helm refused to render (a chart's `fail`, a template error): its message."""


if __name__ == "__main__":
    if sys.argv[1:] == ["helm"]:  # `make install`: the tests render charts, the build is not a test's to time
        print(f"{helm()} {HELM_VERSION}")
    elif sys.argv[1:] == ["build"]:
        build()
        print(f"{HELM} {HELM_VERSION}; dependencies built under {CHARTS}/*/charts")
    elif sys.argv[1:] == ["package"]:  # `make charts-package`
        print("\n".join(str(archive.relative_to(ROOT)) for archive in package()))
    else:
        sys.exit(
            "usage: charts.py helm | build | package   (helm alone; helm then deploy/charts' dependencies in place;"
            " every chart packaged into .local/charts)"
        )
