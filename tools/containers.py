"""Run a pipeline's services as containers from their images instead of local processes.

`run_pipeline.Pipeline` starts each service from an argv and an environment; with
:class:`ContainerLauncher` the same argv runs inside the service's image (``make images``),
the way Kubernetes runs the chart's pods: as uid 10001 with a read-only root filesystem,
every capability dropped, no privilege escalation, a writable ``/tmp`` (the chart's
``emptyDir``) and the aggregator's home and checkpoints as volumes. Nothing of the venv or
the checkout is visible inside, so a file the Dockerfile forgot to copy, a console script
the image lacks or a write outside the volumes fails here as it would in a cluster.

The containers share the host's network (the local stack listens on loopback), and
``podman run`` stays in the foreground: the pipeline's SIGTERM reaches the service (podman
forwards it) and a kill of the podman process is followed by :meth:`remove`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charts import memory_bytes
from images import VERSION, podman_env

UID = 10001
# The charts' container securityContext (fluxgate-lib's defaults): what a local run applies.
CHART_SECURITY = {"runAsUser": UID, "runAsGroup": UID, "readOnlyRootFilesystem": True,
                  "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}  # fmt: skip
# What each image's pod mounts besides /tmp (the charts' volumes): a writable home for
# Spark's scratch files, and the checkpoints. Paths inside the container.
WRITABLE = {"aggregator": ("/home/fluxgate",)}
# emptyDir is not noexec: the JVM's native libraries (snappy, zstd) are unpacked into /tmp and loaded.
TMPFS_OPTIONS = "rw,exec,nosuid,nodev,mode=1777"
IMAGE_NAMES = {
    "mqtt-proxy": "mqtt-proxy",
    "coap-ingest": "coap-ingest",
    "aggregator": "aggregator",
    "es-persister": "es-persister",
    "scylla-persister": "scylla-persister",
    "hazelcast-persister": "hazelcast-persister",
    "device-status": "device-status",
    "console": "console",
}


def security_flags(context: dict[str, Any]) -> list[str]:
    """``podman run`` options for a container ``securityContext``; a field podman cannot
    apply the same way is refused rather than silently left out."""
    known = {"runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation",
             "privileged", "capabilities", "seccompProfile"}  # fmt: skip
    if unknown := set(context) - known:
        raise ValueError(f"securityContext fields the launcher cannot apply: {sorted(unknown)}")
    if context.get("privileged") or context.get("capabilities", {}).get("add"):
        raise ValueError("a privileged container or added capabilities: not what Fluxgate's charts render")
    user = context.get("runAsUser")
    if user is None or (context.get("runAsNonRoot") and user == 0):
        raise ValueError("securityContext without a non-root runAsUser")
    flags = ["--user", f"{user}:{context.get('runAsGroup', user)}"]
    flags += ["--read-only"] if context.get("readOnlyRootFilesystem") else []
    flags += ["--security-opt", "no-new-privileges"] if context.get("allowPrivilegeEscalation") is False else []
    flags += [arg for cap in context.get("capabilities", {}).get("drop", []) for arg in ("--cap-drop", cap.lower())]
    return flags


@dataclass
class ContainerLauncher:
    """Turns a service's local argv and environment into a ``podman run`` of its image."""

    run_id: str  # names the containers, so that two runs on one host never collide
    volumes: Path  # host folders for the containers' volumes
    tag: str = VERSION
    # A pod's own volumes, by service: {path inside: host folder}; they replace the defaults.
    mounts: dict[str, dict[str, Path]] = field(default_factory=dict)
    security: dict[str, dict[str, Any]] = field(default_factory=dict)  # a pod's securityContext, by service
    # A pod's container resources.limits.memory, by service: the kubelet's cgroup limit (the
    # aggregator sizes its heap from it). CPU limits are not applied: they would only throttle.
    memory: dict[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    def handles(self, name: str) -> bool:
        return name in IMAGE_NAMES

    def container(self, name: str) -> str:
        return f"fluxgate-{self.run_id}-{name}"

    def command(self, name: str, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """``podman run`` of ``name``'s image with ``argv[1:]`` (``argv[0]`` is the image's
        entrypoint), and the environment podman itself runs with (it passes the service's
        variables on by name, so no value appears on a command line)."""
        self.remove(name)  # a container killed with its podman process may still be there
        # The pod's command replaces the image's entrypoint, as in Kubernetes. No health check
        # timers: podman runs them from systemd, absent here (`health()` runs one).
        security = security_flags(self.security.get(name, CHART_SECURITY))
        args = ["podman", "run", "--rm", "--name", self.container(name), "--network", "host", "--no-healthcheck",
                "--entrypoint", Path(argv[0]).name, *security]  # fmt: skip
        if name in self.memory:
            args += ["--memory", str(memory_bytes(self.memory[name]))]
        for inside, host in self.volumes_of(name, env).items():
            args += ["--tmpfs", f"{inside}:{TMPFS_OPTIONS}"] if host is None else ["-v", f"{self.own(host)}:{inside}"]
        args += [arg for key in sorted(env) for arg in ("-e", key)]
        args += [self.image(name), *argv[1:]]
        self.started.append(name)
        return args, {**podman_env(), **env}

    def volumes_of(self, name: str, env: dict[str, str]) -> dict[str, Path | None]:
        """What is writable in ``name``'s container: the pod's own volumes when given, else
        /tmp (None: a tmpfs, as an emptyDir), the image's writable folders and the
        aggregator's checkpoint folder, at the same path inside as the service is told."""
        if name in self.mounts:
            return {inside: host for inside, host in self.mounts[name].items()}
        found: dict[str, Path | None] = {"/tmp": None}  # noqa: S108 - the container's own /tmp
        for inside in WRITABLE.get(name, ()):
            found[inside] = self.volumes / name / inside.strip("/").replace("/", "-")
        for key, value in env.items():
            if key.endswith("CHECKPOINT_DIR"):
                found[value] = Path(value)
        return found

    def own(self, folder: Path) -> Path:
        """``folder``, made and owned by the containers' user (a pod's fsGroup does this)."""
        folder.mkdir(parents=True, exist_ok=True)
        os.chown(folder, UID, UID)
        return folder

    def signal(self, name: str, signum: int) -> None:
        """SIGSTOP/SIGCONT pause and resume the whole container (its cgroup's freezer); any
        other signal goes to the container's processes through the engine."""
        verbs: dict[int, list[str]] = {signal.SIGSTOP: ["pause"], signal.SIGCONT: ["unpause"]}
        verb = verbs.get(signum, ["kill", "--signal", str(signum)])
        subprocess.run(["podman", *verb, self.container(name)], env=podman_env(),
                       capture_output=True, timeout=60, check=True)  # fmt: skip

    def health(self, name: str) -> subprocess.CompletedProcess[str]:
        """The image's own HEALTHCHECK command, run once in the running container."""
        inspect = ["podman", "image", "inspect", "--format", "{{json .Config.Healthcheck.Test}}", self.image(name)]
        test = json.loads(subprocess.run(inspect, env=podman_env(), capture_output=True, text=True, check=True).stdout)
        if not test or test[0] != "CMD":
            raise RuntimeError(f"{self.image(name)} has no exec-form HEALTHCHECK: {test}")
        return subprocess.run(["podman", "exec", self.container(name), *test[1:]], env=podman_env(),
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip

    def unhealthy(self) -> dict[str, str]:
        """Each running container whose image's health check fails, with what it said."""
        results = {name: self.health(name) for name in dict.fromkeys(self.started)}
        failed = {name: result for name, result in results.items() if result.returncode}
        return {name: (r.stdout + r.stderr)[-500:] or f"exit {r.returncode}" for name, r in failed.items()}

    def pid(self, name: str) -> int:
        """The host pid of ``name``'s container's first process (its command's)."""
        inspect = ["podman", "inspect", "--format", "{{.State.Pid}}", self.container(name)]
        return int(subprocess.run(inspect, env=podman_env(), capture_output=True, text=True, check=True).stdout)

    def image(self, name: str) -> str:
        return f"fluxgate/{IMAGE_NAMES[name]}:{self.tag}"

    def remove(self, name: str) -> None:
        subprocess.run(["podman", "rm", "--force", "--time", "0", self.container(name)],
                       env=podman_env(), capture_output=True, timeout=60, check=False)  # fmt: skip

    def remove_all(self) -> None:
        for name in dict.fromkeys(self.started):
            self.remove(name)
