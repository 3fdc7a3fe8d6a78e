"""Rendered Kubernetes objects read the way the kubelet reads them: a pod's environment
(ConfigMaps, fieldRefs, Secrets, ``$(VAR)`` references), command, port and probes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

WORKLOADS = ("Deployment", "StatefulSet")
Object = dict[str, Any]


@dataclass(frozen=True)
class Pod:
    """One pod of a rendered workload, as the kubelet would start its (only) container."""

    workload: Object
    ordinal: int
    namespace: str

    @property
    def name(self) -> str:
        base = self.workload["metadata"]["name"]
        names = {"StatefulSet": f"{base}-{self.ordinal}", "SparkApplication": f"{base}-driver"}
        return names.get(self.workload["kind"], f"{base}-7d9f8c6b5-x2x7q")

    @property
    def container(self) -> Object:
        [container] = self.workload["spec"]["template"]["spec"]["containers"]
        return dict(container)

    @property
    def argv(self) -> list[str]:
        return [*self.container.get("command", []), *self.container.get("args", [])]

    @property
    def port(self) -> int:
        [port] = [p["containerPort"] for p in self.container["ports"] if p["name"] == "http"]
        return int(port)

    def probe_paths(self) -> dict[str, str]:
        """``{"livenessProbe": "/healthz", ...}`` for every HTTP probe on the http port."""
        paths: dict[str, str] = {}
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            if kind in self.container:
                get = self.container[kind]["httpGet"]
                assert get["port"] in ("http", self.port), f"{kind} probes port {get['port']}, not the http port"
                paths[kind] = get["path"]
        return paths

    def env(self, objects: list[Object], secrets: dict[tuple[str, str], str] | None = None) -> dict[str, str]:
        """The container's environment: envFrom ConfigMaps, then env in order (fieldRefs,
        secretKeyRefs from ``secrets`` by (Secret, key), ``$(VAR)`` expanded from what
        precedes it, as the kubelet does)."""
        maps = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
        env: dict[str, str] = {}
        for source in self.container.get("envFrom", []):
            env.update(maps[source["configMapRef"]["name"]])
        for item in self.container.get("env", []):
            if "value" in item:
                env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), str(item["value"]))
            elif "fieldRef" in item["valueFrom"]:
                env[item["name"]] = self.field(item["valueFrom"]["fieldRef"]["fieldPath"])
            elif "secretKeyRef" in item["valueFrom"]:
                ref = item["valueFrom"]["secretKeyRef"]
                value = (secrets or {}).get((ref["name"], ref["key"]))
                assert value is not None or ref.get("optional"), f"{item['name']}: Secret {ref['name']} is required"
                if value is not None:
                    env[item["name"]] = value
            else:
                raise AssertionError(f"{item['name']}: unsupported {item['valueFrom']}")
        return env

    def field(self, path: str) -> str:
        fields = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "metadata.labels['apps.kubernetes.io/pod-index']": str(self.ordinal),
        }
        assert path in fields, f"fieldRef {path} is not one this check knows"
        return fields[path]


def pods(objects: list[Object], namespace: str = "fluxgate") -> list[Pod]:
    """Every pod the workloads among ``objects`` would run (replicas, or one when KEDA scales)."""
    return [
        Pod(workload, ordinal, namespace)
        for workload in objects
        if workload["kind"] in WORKLOADS
        for ordinal in range(int(workload["spec"].get("replicas", 1)))
    ]


def spark_driver(app: Object, namespace: str = "fluxgate") -> Pod:
    """The driver pod the Spark operator starts for a rendered SparkApplication: the
    driver's labels, and its environment and mounts on the Spark container."""
    driver = app["spec"]["driver"]
    container = {key: driver[key] for key in ("envFrom", "env", "volumeMounts") if key in driver}
    template = {"metadata": {"labels": driver.get("labels", {})}, "spec": {"containers": [container]}}
    return Pod({"kind": app["kind"], "metadata": app["metadata"], "spec": {"template": template}}, 0, namespace)
