"""The Grafana dashboards in deploy/charts/fluxgate/files/dashboards/ are what ``make dashboards``
(tools/dashboards.py, from tools/dashboard_panels.py) writes now, and read only metrics a
service exports: an edited JSON file, or a panel reading a renamed metric, fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from charts import SERVICES
from dashboard_queries import FOLDER, committed, panel_metrics
from dashboards import generated

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*ROOT.glob("libs/*/src"), *ROOT.glob("services/*/src"), *ROOT.glob("services/persisters/*/src")]
# prometheus_client's process collector, in every service's /metrics.
CLIENT_OWN = {"process_cpu_seconds_total", "process_resident_memory_bytes"}


def test_the_committed_dashboards_are_what_make_dashboards_writes() -> None:
    files = {path.name: path.read_text() for path in FOLDER.glob("*.json")}
    assert files == generated(), "deploy/charts/fluxgate/files/dashboards is stale: make dashboards"


def test_an_overview_and_a_dashboard_per_service() -> None:
    uids = {json.loads(path.read_text())["uid"] for path in FOLDER.glob("*.json")}
    assert uids == {"fluxgate-overview", *(f"fluxgate-{name}" for name in SERVICES)}


def test_every_metric_a_panel_reads_is_exported_by_a_service() -> None:
    code = "\n".join(path.read_text() for source in SOURCES for path in source.rglob("*.py"))
    exported = set(re.findall(r"[\"'](fluxgate_[a-z0-9_]+)[\"']", code))
    exported |= {f"{name}_total" for name in exported if not name.endswith("_total")}
    for panel, metrics in panel_metrics().items():
        assert metrics, f"{panel}: reads no metric?"
        unknown = metrics - exported - CLIENT_OWN
        assert not unknown, f"{panel} reads {sorted(unknown)}, which no service exports"


def test_every_service_dashboard_reads_only_its_own_series() -> None:
    for query in committed():
        service = query.dashboard.removeprefix("fluxgate-")
        if service == "overview":
            continue
        selectors = re.findall(r"\{([^}]*)\}", re.sub(r"\{\{\s*\w+\s*\}\}", "", query.expr))
        assert selectors, f"{query}: {query.expr!r} picks no series"
        assert all(f'fluxgate_service="{service}"' in s for s in selectors), f"{query}: {query.expr!r}"


def test_every_panel_has_a_unique_title_and_id_in_its_dashboard() -> None:
    for path in FOLDER.glob("*.json"):
        panels = json.loads(path.read_text())["panels"]
        ids = [panel["id"] for panel in panels]
        titles = [panel["title"] for panel in panels if panel["type"] != "row"]
        assert len(ids) == len(set(ids)) and 0 not in ids, path.name
        assert len(titles) == len(set(titles)), f"{path.name}: the check names a panel by its title"
