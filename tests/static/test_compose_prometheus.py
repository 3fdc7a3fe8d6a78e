"""Compose's Prometheus (profile ``monitoring``), checked statically: its image cannot be pulled
on the project's CI machines. The same rules are proven against the local stack's real
Prometheus (tools/stack/tests/integration/test_prometheus.py, tests/e2e/test_run_pipeline.py)
and by ``promtool test rules`` (tests/alerts).

deploy/prometheus/prometheus.yml is what ``make compose-prometheus`` (tools/compose_prometheus.py)
writes; independently of that tool, every Fluxgate service of compose is scraped at its compose
name and the port its Settings listen on with compose's environment, labelled
``fluxgate_service`` as the charts' PodMonitors label it (the chart's name, which the rules
group by and the dashboards select by); compose mounts the charts' rules file itself, read-only,
where the configuration names it; and ``promtool check config``, run on the files laid out as the
container sees them, accepts the configuration and loads every rule."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from charts import SERVICES as CHARTS
from compose_prometheus import OUT, generated
from fluxgate_testing import specs
from fluxgate_testing.env import drop_env
from fluxgate_testing.specs import load_with_env
from pydantic_settings import BaseSettings

from fluxgate_stack.fetch import ensure_debian_packages
from fluxgate_stack.servers.prometheus import JOB, RULES, PrometheusServer
from fluxgate_stack.settings import StackSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
SHARED_ENV = set(COMPOSE["x-service-env"])
BUILT = {name: spec for name, spec in SERVICES.items() if "build" in spec}  # the Fluxgate services
PROMETHEUS = SERVICES["prometheus"]
RULES_FILE = ROOT / RULES  # what the charts ship and the local stack's Prometheus loads
LABEL = "fluxgate_service"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(OUT.read_text())
    return loaded


def scraped() -> list[tuple[str, dict[str, str]]]:
    """Every (target, labels) of the committed configuration, in every job."""
    return [
        (target, static.get("labels", {}))
        for job in config()["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    ]


def flags() -> dict[str, str]:
    return dict(str(arg).removeprefix("--").split("=", 1) for arg in PROMETHEUS["command"])


def bind_mounts() -> dict[PurePosixPath, tuple[Path, str]]:
    """Container path -> (host path, options) of each bind mount (named volumes left out)."""
    mounts = {}
    for volume in PROMETHEUS["volumes"]:
        source, target, *options = str(volume).split(":")
        if source.startswith((".", "/")):
            mounts[PurePosixPath(target)] = ((ROOT / source).resolve(), ",".join(options))
    return mounts


def listening_settings(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The service's Settings (found by its folder and the prefix of its compose variables, as
    tests/static/test_compose.py finds them) loaded from exactly its compose environment."""
    own = [key for key in BUILT[name]["environment"] if key not in SHARED_ENV]
    [prefix] = {"_".join(key.split("_")[:2]) + "_" for key in own}
    folder = (ROOT / str(BUILT[name]["build"]["dockerfile"])).parent
    cls: type[BaseSettings] = specs.settings_class(folder, prefix)
    return load_with_env(cls, BUILT[name]["environment"], monkeypatch)


def promtool() -> str:
    """Found as tests/alerts/test_rules.py finds it: on PATH after ``make install``, else
    installed from Debian's package (a missing one is a broken install, not a skip)."""
    found = shutil.which("promtool")
    if found is None:
        ensure_debian_packages({"promtool": PrometheusServer.debian_packages["promtool"]})
        found = shutil.which("promtool")
    assert found, "promtool: not on PATH after installing Debian's prometheus package"
    return found


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> StackSettings:
    """The local stack's defaults, not this shell's ``FLUXGATE_STACK_*``."""
    drop_env(monkeypatch, "FLUXGATE_STACK_")
    return StackSettings()


def test_the_committed_config_is_what_make_compose_prometheus_writes() -> None:
    assert OUT.read_text() == generated(), "deploy/prometheus/prometheus.yml is stale: make compose-prometheus"


@pytest.mark.parametrize("name", sorted(BUILT))
def test_every_fluxgate_service_is_scraped_where_it_listens_with_its_label(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    http = listening_settings(name, monkeypatch).http
    # /metrics is served on the HTTP port, on an address other containers reach
    assert http.host not in LOOPBACK, f"{name} listens on its container's loopback only"
    assert str(http.port) in " ".join(BUILT[name]["healthcheck"]["test"])  # the port it really serves on
    assert (f"{name}:{http.port}", {LABEL: name}) in scraped(), f"{name} is not scraped at {name}:{http.port}"


def test_nothing_else_is_scraped_and_each_service_once() -> None:
    [job] = config()["scrape_configs"]
    assert job["job_name"] == JOB  # the local stack's job
    assert job.get("metrics_path", "/metrics") == "/metrics" and job.get("scheme", "http") == "http"
    assert sorted(target for target, _ in scraped()) == sorted({target for target, _ in scraped()})
    assert sorted(labels[LABEL] for _, labels in scraped()) == sorted(BUILT)
    assert all(target.split(":")[0] == labels[LABEL] for target, labels in scraped())


def test_the_labels_are_the_names_the_charts_podmonitors_give() -> None:
    """The charts' PodMonitors and ServiceMonitors set ``fluxgate_service`` to the chart's name,
    which the dashboards select by (tests/static/test_dashboards.py): the same values here."""
    labels = {labels[LABEL] for _, labels in scraped()}
    assert labels == set(CHARTS)
    for name in labels:
        assert yaml.safe_load((ROOT / "deploy/charts" / name / "Chart.yaml").read_text())["name"] == name
    relabel = (ROOT / "deploy/charts/fluxgate-lib/templates/_objects.tpl").read_text()
    assert f"- targetLabel: {LABEL}\n    replacement: {{{{ .Chart.Name }}}}" in relabel


def test_prometheus_is_only_under_the_monitoring_profile() -> None:
    assert PROMETHEUS["profiles"] == ["monitoring"]
    for name, spec in SERVICES.items():  # a plain `up` (or Kibana's profile) never pulls it in
        if name != "prometheus":
            assert "prometheus" not in spec.get("depends_on", {}), f"{name} would pull in Prometheus"
    assert not PROMETHEUS.get("depends_on")  # it scrapes whatever runs; a stopped service is down to it
    assert "build" not in PROMETHEUS and str(PROMETHEUS["image"]).startswith("prom/prometheus:v")
    header = (ROOT / "docker-compose.yml").read_text().split("\nname:", 1)[0]
    assert "docker compose --profile monitoring up --build" in header


def test_the_rules_mounted_are_the_charts_file_itself_read_only() -> None:
    mounts = bind_mounts()
    config_target = PurePosixPath(flags()["config.file"])
    [rule_file] = config()["rule_files"]
    rules_target = config_target.parent / rule_file  # Prometheus resolves it from the config's folder
    assert mounts[rules_target] == (RULES_FILE.resolve(), "ro")
    assert mounts[config_target] == (OUT.resolve(), "ro")
    # no copy of the rules anywhere in deploy/ but the charts' own file
    copies = [path for path in (ROOT / "deploy").rglob("*.y*ml") if path.read_text() == RULES_FILE.read_text()]
    assert copies == [RULES_FILE]


def test_prometheus_runs_as_the_local_stack_s(stack: StackSettings) -> None:
    options = flags()
    assert options["storage.tsdb.retention.time"] == stack.prometheus_retention
    named = {str(v).split(":")[1]: str(v).split(":")[0] for v in PROMETHEUS["volumes"]}
    assert named[options["storage.tsdb.path"]] in COMPOSE["volumes"]  # samples survive `docker compose down`
    listen = options.get("web.listen-address", "0.0.0.0:9090").rsplit(":", 1)[1]
    assert f"{stack.prometheus_port}:{listen}" in PROMETHEUS["ports"]
    health = " ".join(PROMETHEUS["healthcheck"]["test"])
    assert f":{listen}/-/ready" in health  # the readiness the local stack probes
    interval = stack.prometheus_scrape_interval
    assert config()["global"] == {"scrape_interval": interval, "evaluation_interval": interval}


@pytest.mark.downloads  # promtool: Debian's prometheus package
def test_promtool_accepts_the_config_as_the_container_sees_it(tmp_path: Path) -> None:
    """The bind mounts laid out under tmp_path as in the container: promtool resolves the rules
    file from the configuration's folder, fails if it is missing, and checks each rule."""
    for target, (source, _) in bind_mounts().items():
        (tmp_path / target.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tmp_path / target.relative_to("/"))
    config_file = tmp_path / PurePosixPath(flags()["config.file"]).relative_to("/")
    done = subprocess.run(
        [promtool(), "check", "config", str(config_file)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rules = sum(len(group["rules"]) for group in yaml.safe_load(RULES_FILE.read_text())["groups"])
    assert f"SUCCESS: {rules} rules found" in done.stdout, done.stdout


@pytest.mark.downloads
def test_the_image_is_the_version_promtool_checks() -> None:
    """The local stack's Prometheus (Debian's) is the one whose promtool checks this: compose runs
    the same release, so what promtool accepts here is what the container loads."""
    done = subprocess.run([promtool(), "--version"], capture_output=True, text=True, check=True)
    version = (done.stdout or done.stderr).split()[2].split("+")[0]  # "promtool, version 2.42.0+ds ..."
    assert str(PROMETHEUS["image"]).rsplit(":", 1)[1] == f"v{version}"
