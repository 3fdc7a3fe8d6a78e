"""Fluxgate's alerts (deploy/charts/fluxgate/files/prometheus-rules.yaml), checked by the real
``promtool`` (Debian's ``prometheus`` package, which ``make install`` installs): the file is
valid, every alert is tested firing and not firing (tests/alerts/rules_test.yaml), every
alert has a runbook that says what it means, how to confirm it and what to do, and every
metric a rule reads is one a service exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluxgate_stack.servers.prometheus import metrics_read

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/charts/fluxgate/files/prometheus-rules.yaml"
TESTS = Path(__file__).with_name("rules_test.yaml")
RUNBOOK_SECTIONS = ("## What it means", "## Confirm it", "## What to do")
SOURCES = [*ROOT.glob("libs/*/src"), *ROOT.glob("services/*/src"), *ROOT.glob("services/persisters/*/src")]
PROMETHEUS_OWN = {"up"}  # written by Prometheus for every target


def alerts() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:  # make install puts it there: a missing one is a broken install, not a skip
        from fluxgate_stack.fetch import ensure_debian_packages

        ensure_debian_packages({"promtool": "prometheus"})
        found = shutil.which("promtool")
    assert found, "promtool: not on PATH after installing Debian's prometheus package"
    return found


@pytest.mark.downloads  # promtool: Debian's prometheus package
def test_the_rules_file_is_valid() -> None:
    done = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.downloads
def test_every_alert_fires_and_stays_quiet_as_its_tests_say() -> None:
    done = subprocess.run(
        [promtool(), "test", "rules", TESTS.name], cwd=TESTS.parent, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_firing_and_a_quiet_test() -> None:
    checks = [check for case in yaml.safe_load(TESTS.read_text())["tests"] for check in case["alert_rule_test"]]
    for alert in alerts():
        mine = [check for check in checks if check["alertname"] == alert["alert"]]
        assert any(check["exp_alerts"] for check in mine), f"{alert['alert']}: never tested firing"
        assert any(not check["exp_alerts"] for check in mine), f"{alert['alert']}: never tested quiet"


@pytest.mark.parametrize("alert", [rule["alert"] for rule in alerts()])
def test_every_alert_has_a_runbook(alert: str) -> None:
    [rule] = [rule for rule in alerts() if rule["alert"] == alert]
    assert rule["annotations"]["runbook_url"] == f"docs/runbooks/{alert}.md"
    assert rule["labels"]["severity"] in ("critical", "warning")
    page = (ROOT / rule["annotations"]["runbook_url"]).read_text()
    assert page.startswith(f"# {alert}\n"), "a runbook is titled by its alert"
    for section in RUNBOOK_SECTIONS:
        assert section in page, f"docs/runbooks/{alert}.md: no {section!r}"


def test_every_runbook_belongs_to_an_alert() -> None:
    pages = {page.stem for page in (ROOT / "docs/runbooks").glob("*.md")} - {"README"}
    assert pages == {rule["alert"] for rule in alerts()}


def test_every_metric_a_rule_reads_is_exported_by_a_service() -> None:
    code = "\n".join(path.read_text() for source in SOURCES for path in source.rglob("*.py"))
    exported = set(re.findall(r"[\"'](fluxgate_[a-z0-9_]+)[\"']", code))
    # prometheus_client adds _total to a Counter named without it.
    exported |= {f"{name}_total" for name in exported if not name.endswith("_total")}
    for rule in alerts():
        metrics = metrics_read(rule["expr"])
        assert metrics, f"{rule['alert']}: reads no metric?"
        unknown = metrics - exported - PROMETHEUS_OWN
        assert not unknown, f"{rule['alert']} reads {sorted(unknown)}, which no service exports"


def test_metrics_read_finds_the_metrics_and_nothing_else() -> None:
    expr = 'sum by (a, b) (rate(x_total{c="d"}[5m])) > 1 and on (a) y offset 10m / z or w == 0'
    assert metrics_read(expr) == {"x_total", "y", "z", "w"}
