"""Prometheus 2.x from Debian, with Fluxgate's alerts, scraping what the pipeline's runs name.

Its scrape targets come from files (``file_sd_configs``): ``make run`` writes one naming each
service's health port and its ``fluxgate_service`` label (:func:`write_targets`), removes it
when it stops, and Prometheus follows within ``refresh_interval``. The rules are the ones the
charts ship (``deploy/charts/fluxgate/files/prometheus-rules.yaml``), so the local stack
evaluates exactly what a cluster would.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from fluxgate_stack import probes
from fluxgate_stack.errors import InstallError
from fluxgate_stack.fetch import find_binary
from fluxgate_stack.servers.base import Port, Server
from fluxgate_stack.settings import StackSettings

RULES = Path("deploy/charts/fluxgate/files/prometheus-rules.yaml")  # in the repository
JOB = "fluxgate"


class PrometheusServer(Server):
    """Prometheus, on loopback, scraping the targets files of pipeline runs."""

    name = "prometheus"
    ready_timeout = 30.0
    stop_grace = 10.0
    debian_packages = {"prometheus": "prometheus", "promtool": "prometheus"}

    @property
    def config_file(self) -> Path:
        return self.run_dir / "prometheus.yml"

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.prometheus_port}"

    def ports(self) -> list[Port]:
        return [Port(self.settings.prometheus_port)]

    def config_files(self) -> dict[Path, str]:
        return {self.config_file: prometheus_yml(self.settings, targets_dir(self.settings))}

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        targets_dir(self.settings).mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        binary = find_binary("prometheus")
        if binary is None:
            raise InstallError("prometheus: binary not found; run `fluxgate-stack install prometheus`")
        return [
            binary,
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--storage.tsdb.retention.time={self.settings.prometheus_retention}",
            f"--web.listen-address={self.settings.host}:{self.settings.prometheus_port}",
            # The console templates of Debian's package are not needed: the API and /alerts are.
            "--web.enable-lifecycle",
        ]

    def probe(self) -> bool:
        return probes.http_ok(f"{self.url}/-/ready")

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_PROMETHEUS_URL": self.url}


def targets_dir(settings: StackSettings) -> Path:
    return settings.local_dir / "run" / "prometheus" / "targets"


def prometheus_yml(settings: StackSettings, targets: Path) -> str:
    interval = settings.prometheus_scrape_interval
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(settings.local_dir.parent / RULES)],
        "scrape_configs": [
            {
                "job_name": JOB,
                "file_sd_configs": [{"files": [str(targets / "*.json")], "refresh_interval": interval}],
            }
        ],
    }
    return "# written by fluxgate-stack before every start\n" + str(yaml.safe_dump(config, sort_keys=False))


def write_targets(run: str, services: Mapping[str, str], settings: StackSettings | None = None) -> Path:
    """Have Prometheus scrape ``services`` (name -> ``host:port`` of its ``/metrics``), each
    labelled ``fluxgate_service`` with its name, until :func:`remove_targets` of ``run``.
    Written aside and renamed: Prometheus never reads half a file."""
    folder = targets_dir(settings or StackSettings())
    folder.mkdir(parents=True, exist_ok=True)
    groups = [{"targets": [address], "labels": {"fluxgate_service": name}} for name, address in services.items()]
    path = folder / f"{run}.json"
    aside = folder / f".{run}.json.tmp"
    aside.write_text(json.dumps(groups, indent=2) + "\n")
    os.replace(aside, path)
    return path


def remove_targets(run: str, settings: StackSettings | None = None) -> None:
    """Stop scraping what :func:`write_targets` named for ``run`` (its services stopped: they
    would otherwise be reported down)."""
    (targets_dir(settings or StackSettings()) / f"{run}.json").unlink(missing_ok=True)


def rule_metrics(rules: Path) -> dict[str, set[str]]:
    """Each alert of a rules file and the metric names its expression reads."""
    groups = yaml.safe_load(rules.read_text())["groups"]
    return {rule["alert"]: metrics_read(rule["expr"]) for group in groups for rule in group["rules"] if "alert" in rule}


def metrics_read(expr: str) -> set[str]:
    """The metric names in a PromQL expression: its identifiers once label lists
    (``by (...)``, ``on (...)``), matchers (``{...}``), ranges and calls' names are gone."""
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    return names - {"and", "or", "unless", "offset", "bool"}
