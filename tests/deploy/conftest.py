"""The charts built once per session (in a copy: the repository's deploy/charts stays
untouched) and the custom resources' schemas, from the Go module proxy."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate.utils
import pytest
import yaml
from charts import copy_built, go_binary

# Each operator's CRD, from the module of the operator's own repository (Go's module cache).
CRDS = {
    ("keda.sh/v1alpha1", "ScaledObject"): (
        "github.com/kedacore/keda/v2@v2.21.0",
        "config/crd/bases/keda.sh_scaledobjects.yaml",
    ),
    ("monitoring.coreos.com/v1", "PodMonitor"): (
        "github.com/prometheus-operator/prometheus-operator@v0.85.0",
        "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): (
        "github.com/prometheus-operator/prometheus-operator@v0.85.0",
        "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
    ),
    ("monitoring.coreos.com/v1", "PrometheusRule"): (
        "github.com/prometheus-operator/prometheus-operator@v0.85.0",
        "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
    ),
    # The operator's last release the proxy serves; v1beta2 is still the SparkApplication API.
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): (
        "github.com/GoogleCloudPlatform/spark-on-k8s-operator@v0.0.0-20201215015655-2e8b733f5ad0",
        "manifest/crds/sparkoperator.k8s.io_sparkapplications.yaml",
    ),
}


@pytest.fixture(scope="session")
def built_charts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_built(tmp_path_factory.mktemp("deploy") / "charts")


def module_dir(module: str) -> Path:
    result = subprocess.run(
        [go_binary("download the CRDs' modules"), "mod", "download", "-json", module],
        capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "GOFLAGS": "-mod=mod"},
    )  # fmt: skip
    info = json.loads(result.stdout)
    assert "Error" not in info, info.get("Error")
    return Path(info["Dir"])


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused, as the API server's strict field validation
    does: every object that lists its properties allows no others (kubeconform's -strict)."""
    if isinstance(schema, dict):
        schema = {key: strict(value) for key, value in schema.items()}
        if isinstance(schema.get("pattern"), str):
            schema["pattern"] = python_pattern(schema["pattern"])
        listed = "properties" in schema and schema.get("type", "object") == "object"
        if listed and "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [strict(item) for item in schema]
    return schema


def python_pattern(pattern: str) -> str:
    """A CRD's pattern is Go's RE2, where a flag group may follow ``^`` (PrometheusRule's
    ``^(?i)(abort|warn)?$``); Python wants global flags first, meaning the same."""
    if pattern.startswith("^(?") and (flags := re.match(r"\^(\(\?[a-z]+\))", pattern)):
        return flags.group(1) + "^" + pattern[len(flags.group(0)) :]
    return pattern


@pytest.fixture(scope="session")
def crd_schemas() -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> the strict openAPIV3Schema of that version of the CRD."""
    schemas = {}
    for (api_version, kind), (module, path) in CRDS.items():
        crd = yaml.safe_load((module_dir(module) / path).read_text())
        version = api_version.split("/")[1]
        [served] = [v for v in crd["spec"].get("versions", []) if v["name"] == version]
        schema = served.get("schema", crd["spec"].get("validation"))["openAPIV3Schema"]
        assert crd["spec"]["names"]["kind"] == kind
        schemas[(api_version, kind)] = strict(schema)
    return schemas


@pytest.fixture(autouse=True, scope="session")
def kubernetes_schemas_read_once() -> Iterator[None]:
    """kubernetes_validate reads its schema files again for every object it checks, the
    definitions (a 1.8 MB JSON file) among them: 7 of the 12 s of test_charts.py's object checks.
    The files are part of the installed package: read each once a session."""
    with pytest.MonkeyPatch.context() as patch:
        cached = functools.cache(kubernetes_validate.utils.schema_contents)
        patch.setattr(kubernetes_validate.utils, "schema_contents", cached)
        yield
