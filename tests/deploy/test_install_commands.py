"""deploy/README.md's install commands, run as they are written, rendering only: there is no
cluster. Every fenced shell block of its Install section runs in one bash, in a folder holding
a copy of deploy/charts (dependencies not built: the documented commands build them), with
`helm install` run as `helm install --dry-run=client` against a stand-in for the cluster
(tools/charts.py's offline_cluster), every other helm command as it is, and `kubectl` and
`kafka-topics.sh` recorded, not run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from charts import CHARTS, helm, offline_cluster

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "deploy" / "README.md"
HELM_HOMES = ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")
RECORDED = ("kubectl", "kafka-topics.sh")  # they would need the cluster: their arguments are kept
HELM_SHIM = """#!/usr/bin/env bash
set -euo pipefail
echo "helm $*" >> "$COMMANDS"
if [ "${1:-}" = install ]; then
  exec "$REAL_HELM" "$@" --dry-run=client ${EXTRA_INSTALL_ARGS:-}
fi
exec "$REAL_HELM" "$@"
"""


def install_section() -> str:
    text = README.read_text()
    start = text.index("\n## Install\n")
    return text[start : text.index("\n## ", start + 1)]


def shell_blocks(section: str) -> list[str]:
    return re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", section, flags=re.S | re.M)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A folder with deploy/charts as the repository has it, shims first on PATH, helm's own
    folders its own (no repository or cache of this machine's), the cluster a stand-in."""
    shutil.copytree(CHARTS, tmp_path / "deploy/charts", ignore=shutil.ignore_patterns("charts", "Chart.lock"))
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "helm").write_text(HELM_SHIM)
    for command in RECORDED:
        (shims / command).write_text(f'#!/usr/bin/env bash\necho "{command} $*" >> "$COMMANDS"\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    with offline_cluster() as cluster:
        env = {
            **os.environ, **cluster,
            "PATH": f"{shims}:{os.environ['PATH']}", "REAL_HELM": str(helm()), "COMMANDS": str(tmp_path / "commands"),
            "REGISTRY": "registry.example.com",
            **{name: str(tmp_path / "helm" / name) for name in HELM_HOMES},
        }  # fmt: skip
        yield tmp_path, env


def run_section(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = "\n".join(shell_blocks(install_section()))
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_the_install_section_has_the_commands_a_user_runs() -> None:
    script = "\n".join(shell_blocks(install_section()))
    assert "helm dependency build" in script
    assert re.search(r"^helm install fluxgate deploy/charts/fluxgate ", script, flags=re.M)
    assert re.search(r"^helm install \S+ dist/fluxgate-\S+\.tgz", script, flags=re.M)
    for chart in ("mqtt-proxy", "coap-ingest", "aggregator", "es-persister", "scylla-persister",
                  "hazelcast-persister", "device-status", "console"):  # fmt: skip
        assert f"--set-string {chart}.image.repository=$REGISTRY/fluxgate/{chart}" in script, chart


@pytest.mark.downloads
def test_the_documented_install_commands_render(workdir: tuple[Path, dict[str, str]]) -> None:
    folder, env = workdir
    result = run_section(folder, env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    commands = (folder / "commands").read_text().splitlines()
    installs = [line for line in commands if line.startswith("helm install ")]
    assert len(installs) == 3, commands  # the umbrella, one service alone, the packaged umbrella
    assert result.stdout.count("STATUS: pending-install") == 3, "each install rendered, dry run"
    assert "NOTES:" in result.stdout and "kubectl -n fluxgate port-forward svc/fluxgate-console 9108" in result.stdout
    assert "registry.example.com/fluxgate/console" in result.stdout, "the documented images are the pods'"
    assert any(line.startswith("kubectl -n fluxgate create secret generic fluxgate-secrets") for line in commands)
    packaged = sorted(path.name for path in (folder / "dist").glob("*.tgz"))
    assert len(packaged) == len(list((folder / "deploy/charts").glob("*/Chart.yaml"))), packaged


@pytest.mark.downloads
def test_the_documented_install_refuses_a_misspelled_setting(workdir: tuple[Path, dict[str, str]]) -> None:
    folder, env = workdir
    env["EXTRA_INSTALL_ARGS"] = "--set es-persister.config.FLUXGATE_ES_ELASTICSEARCH__HOST=http://es:9200"
    result = run_section(folder, env)
    assert result.returncode != 0
    assert "additional properties 'FLUXGATE_ES_ELASTICSEARCH__HOST' not allowed" in result.stderr, result.stderr
