"""The umbrella chart's dashboards ConfigMap (templates/dashboards-configmap.yaml): rendered only
with ``dashboards.enabled``, labelled for Grafana's sidecar, and carrying every dashboard file
of ``files/dashboards/`` unchanged (helm, built from the Go module proxy: ``downloads``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from charts import UMBRELLA, lint, render

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy/charts/fluxgate/files/dashboards"

pytestmark = pytest.mark.downloads


def configmaps(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-dashboards")]


@pytest.fixture(scope="module")
def dev(built_charts: Path) -> Path:
    return built_charts / UMBRELLA / "values-dev.yaml"


def test_no_dashboards_unless_enabled(built_charts: Path, dev: Path) -> None:
    assert configmaps(render(built_charts / UMBRELLA, values=[dev])) == []


def test_the_configmap_carries_every_dashboard_for_grafanas_sidecar(built_charts: Path, dev: Path) -> None:
    on = {"dashboards": {"enabled": True, "labels": {"team": "iot"}, "annotations": {"grafana_folder": "Fluxgate"}}}
    [configmap] = configmaps(render(built_charts / UMBRELLA, release="prod", values=[dev, on]))
    metadata = configmap["metadata"]
    assert metadata["name"] == "prod-fluxgate-dashboards"
    assert metadata["labels"]["grafana_dashboard"] == "1"
    assert metadata["labels"]["team"] == "iot"
    assert metadata["annotations"] == {"grafana_folder": "Fluxgate"}
    committed = {path.name: path.read_text() for path in DASHBOARDS.glob("*.json")}
    assert len(committed) == 9  # the overview and one per service
    assert configmap["data"] == committed
    assert all(json.loads(text)["uid"] == name.removesuffix(".json") for name, text in configmap["data"].items())
    kubernetes_validate.validate(configmap, "1.37.0", strict=True)


def test_the_chart_lints_with_the_dashboards_on(built_charts: Path, dev: Path) -> None:
    result = lint(built_charts / UMBRELLA, [dev, {"dashboards": {"enabled": True}}])
    assert result.returncode == 0, result.stdout + result.stderr
