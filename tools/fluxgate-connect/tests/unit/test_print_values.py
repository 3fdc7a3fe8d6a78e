"""``--print-values`` renders (``helm template``, the service's own chart) into a pod whose
environment is ``--print-env``'s: every setting in the ConfigMap the pod reads, each secret
from the Secret, the chart's own additions aside (its HTTP port, JSON logs, per-pod ids)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts import copy_built, render
from connect_fixtures import ELASTIC_ENV, FIXTURES
from typer.testing import CliRunner

from fluxgate_connect.cli import app

# helm (tools/charts.py) is built from the Go module proxy: not for `make test-unit`.
pytestmark = pytest.mark.downloads

CASES = {
    "hazelcast-sink.properties": {},
    "elastic-sink.json": ELASTIC_ENV,
    "cassandra-sink.properties": {},
    "mqtt-source.properties": {},
    "coap-source.properties": {},
}


@pytest.fixture(scope="module")
def charts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_built(tmp_path_factory.mktemp("deploy") / "charts")


def printed(fixture: str, environ: dict[str, str], *options: str) -> str:
    result = CliRunner().invoke(app, ["connect", str(FIXTURES / fixture), *options], env=environ)
    assert result.exit_code == 0, result.output
    return result.stdout


def env_lines(text: str) -> dict[str, str]:
    pairs = [shlex.split(line)[0] for line in text.splitlines() if line and not line.startswith("#")]
    return dict(pair.split("=", 1) for pair in pairs)


def every_members(text: str) -> tuple[dict[str, str], set[str]]:
    """--print-env's settings of every member; the names each member (tasks.max > 1) has of its own."""
    common, *members = text.split("# member ")
    return env_lines(common), {name for member in members for name in env_lines(member.split("\n", 1)[1])}


def pod_of(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str], int]:
    """The workload's container, the ConfigMap it reads, its replicas."""
    [workload] = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap"]
    [container] = workload["spec"]["template"]["spec"]["containers"]
    return container, config_map["data"], workload["spec"].get("replicas", 1)


@pytest.mark.parametrize(("fixture", "environ"), CASES.items(), ids=list(CASES))
def test_the_printed_values_render_a_pod_with_the_printed_environment(
    charts: Path, fixture: str, environ: dict[str, str]
) -> None:
    env, members_own = every_members(printed(fixture, environ, "--print-env", "--show-secrets"))
    secret = set(env) - every_members(printed(fixture, environ, "--print-env"))[0].keys()
    values_text = printed(fixture, environ, "--print-values")
    values = yaml.safe_load(values_text)
    service = values_text.split(":", 1)[0].removeprefix("# ")
    chart = yaml.safe_load((charts / service / "values.yaml").read_text())
    container, data, replicas = pod_of(render(charts / service, values=[values]))
    prefix = chart["envPrefix"]
    own = {f"{prefix}HTTP__PORT": str(chart["httpPort"]), f"{prefix}LOG__JSON_OUTPUT": "true"}
    per_pod = {item["name"]: item for item in container["env"]}
    set_per_pod = {name for name in env if name in per_pod and name not in secret}
    assert set_per_pod <= {"FLUXGATE_MQTT_MQTT__CLIENT_ID", "FLUXGATE_MQTT_MQTT__SHARE_GROUP"}
    assert members_own <= per_pod.keys() | own.keys()  # what sets fluxgate connect's members apart sets pods apart
    plain = {name: value for name, value in env.items() if name not in secret | set_per_pod}
    assert data == {**plain, **own}  # the ConfigMap the pod reads: --print-env's settings, the chart's own
    for name in set_per_pod:  # one client id per replica, the pod's name; one $share group for all
        assert per_pod[name]["value"] == ("$(POD_NAME)" if name.endswith("CLIENT_ID") else env[name])
    for name in secret:
        assert per_pod[name]["valueFrom"]["secretKeyRef"]["name"] == values["secrets"]["existingSecret"]
    assert replicas == values["replicaCount"]
