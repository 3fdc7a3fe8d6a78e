"""Each pod the umbrella chart renders, run for real in a container from its image (`make
images`): every Deployment's and StatefulSet's container started with the pod spec's command,
args, environment (as the kubelet builds it), security context (uid, read-only root
filesystem, dropped capabilities, no privilege escalation), memory limit and volumes, the
in-cluster host names of values-dev.yaml mapped to the local stack; with simulated devices
running, every rendered startup, liveness and readiness probe must answer 200 on the rendered
port, the devices' readings must reach every store and device-status, the aggregator's JVM
must have the heap its limit leaves, and every service must stop cleanly. A renamed variable,
a wrong port, a file the image lacks or a write outside the pod's volumes fails here even
where a static check cannot tell."""

from __future__ import annotations

import contextlib
import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts import CHARTS, SERVICES, UMBRELLA, render
from containers import ContainerLauncher
from fluxgate_testing import descendants, free_port
from fluxgate_testing.k8s import Pod, pods
from pipeline_stores import Stores
from prefixed_run import TOPICS
from run_pipeline import (
    Names,
    Pipeline,
    coap_resources_of,
    console_stores,
    devices_argv,
    parse_args,
    prefixed,
    stop_upstream_first,
)

from fluxgate_stack import ensure_up
from fluxgate_stack.topics import create_topics

# fixed_names: the pods listen on their rendered ports (9101-9107), the ones `make run` uses;
# downloads: the charts are rendered by helm, built from the Go module proxy, and the images
# install their packages.
# The images fixture may wait for CI's background build of every image (a fresh machine: minutes).
IMAGES_TIMEOUT_S = 2700
pytestmark = [
    pytest.mark.integration, pytest.mark.spark, pytest.mark.paired, pytest.mark.fixed_names, pytest.mark.downloads,
    pytest.mark.containers,
    pytest.mark.timeout(IMAGES_TIMEOUT_S),
]  # fmt: skip

# Each chart's envPrefix: the settings prefix its pod's environment carries.
PREFIXES = {name: yaml.safe_load((CHARTS / name / "values.yaml").read_text())["envPrefix"] for name in SERVICES}


def local_host_names(endpoints: Any) -> dict[str, str]:
    """values-dev.yaml's in-cluster addresses -> the local stack's."""
    registry = endpoints.registry_url.split("/apis/")[0]
    return {
        "kafka:9092": endpoints.bootstrap,
        "http://registry:8081": registry,
        "http://elasticsearch:9200": endpoints.elasticsearch_url,
        # contact points are host names only (the driver cannot resolve "host:port"); the
        # port is FLUXGATE_SCYLLA_SCYLLA__PORT, which values-dev leaves at its default
        '["scylla"]': f'["{endpoints.cassandra_host}"]',
        "hazelcast:5701": endpoints.hazelcast_address,
    }


def local_env(pod: Pod, objects: list[dict[str, Any]], endpoints: Any) -> dict[str, str]:
    """The pod's environment, its servers mapped to this machine (nothing else changes)."""
    env = pod.env(objects)
    # The console's services: each in-cluster Service or StatefulSet pod is this machine's port.
    in_cluster = re.compile(r"http://[a-z0-9.-]+\.fluxgate\.svc:")
    for key, value in env.items():
        for cluster, local in local_host_names(endpoints).items():
            value = value.replace(cluster, local)
        env[key] = in_cluster.sub("http://127.0.0.1:", value)
    if env.get("FLUXGATE_MQTT_MQTT__HOST") == "mosquitto":
        env["FLUXGATE_MQTT_MQTT__HOST"] = endpoints.mqtt_host
        assert endpoints.mqtt_port == 1883, "the rendered pod connects to mosquitto's default port"
    if env.get("FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS") == f'["{endpoints.cassandra_host}"]':
        assert "FLUXGATE_SCYLLA_SCYLLA__PORT" not in env and endpoints.cassandra_port == 9042, (
            "the rendered pod connects to the CQL default port"
        )
    return env


def pod_volumes(pod: Pod, folder: Path) -> dict[str, Path]:
    """Each of the pod's volume mounts, as a folder of the test's (emptyDir and claims alike)."""
    return {m["mountPath"]: folder / pod.name / m["name"] for m in pod.container.get("volumeMounts", [])}


def probe_until_ok(pod: Pod, pipeline: Pipeline, name: str, timeout: float) -> dict[str, int]:
    """Every rendered probe path on the rendered port, until each answers 200 (or ``timeout``)."""
    deadline, status = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        assert pipeline.running(name), f"{name} exited:\n{pipeline.tail(name)}"
        for kind, path in pod.probe_paths().items():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{pod.port}{path}", timeout=3) as reply:
                    status[kind] = reply.status
            except (urllib.error.URLError, OSError) as error:
                status[kind] = getattr(error, "code", 0)
        if set(status.values()) == {200}:
            return status
        time.sleep(1)
    raise AssertionError(f"{name}: probes {status} after {timeout:.0f} s\n{pipeline.tail(name)}")


def driver_heap_flag(pid: int) -> str:
    """The -Xmx of the Spark JVM among ``pid``'s descendants (host pids): the heap the
    aggregator gave the driver it started."""
    flags = []
    for child in descendants([pid]):
        with contextlib.suppress(OSError):  # a Python worker may have ended since
            flags += [arg.decode() for arg in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                      if arg.startswith(b"-Xmx")]  # fmt: skip
    assert len(flags) == 1, f"JVM heap flags under pid {pid}: {flags}"
    return flags[0]


def test_every_rendered_pod_runs_in_its_container_probes_answer_and_data_flows(
    built_charts: Path, images: str, tmp_path: Path, elasticsearch: str, cassandra: Any, hazelcast: Any
) -> None:
    endpoints = ensure_up(["kafka", "registry", "mosquitto", "elasticsearch", "cassandra", "hazelcast"])
    names = Names(prefix=f"helm{uuid.uuid4().hex[:6]}.")
    create_topics(endpoints.bootstrap, {names.topic(topic): 3 for topic in TOPICS})
    args = parse_args(["--mqtt-devices", "4", "--coap-devices", "2", "--coap-port", str(free_port(socket.SOCK_DGRAM)),
                       "--window", "5 seconds", "--watermark", "5 seconds"])  # fmt: skip
    # Only what a user sets for a pipeline of their own: its names (and a short window).
    config: dict[str, Any] = {name: {"config": prefixed(prefix, names.env(name))} for name, prefix in PREFIXES.items()
                              if name != "console"}  # fmt: skip
    config["console"] = {"config": prefixed(PREFIXES["console"], console_stores(names, shown=True))}
    config["coap-ingest"]["config"]["FLUXGATE_COAP_RESOURCES"] = coap_resources_of(args, names)
    config["aggregator"]["config"] |= {"FLUXGATE_AGG_WINDOW__SIZE": args.window,
                                       "FLUXGATE_AGG_WINDOW__WATERMARK": args.watermark}  # fmt: skip
    objects = render(built_charts / UMBRELLA, values=[built_charts / UMBRELLA / "values-dev.yaml", config])
    rendered = pods(objects)
    assert {pod.argv[0] for pod in rendered} == {f"fluxgate-{name}" for name in PREFIXES}

    stores = Stores(endpoints, names.es_alias, f"fluxgate.{names.store_target}", names.store_target)
    by_name = {pod.argv[0].removeprefix("fluxgate-"): pod for pod in rendered}
    launcher = ContainerLauncher(
        names.prefix.rstrip("."), tmp_path, images,
        mounts={name: pod_volumes(pod, tmp_path) for name, pod in by_name.items()},
        security={name: pod.container["securityContext"] for name, pod in by_name.items()},
        memory={name: pod.container["resources"]["limits"]["memory"] for name, pod in by_name.items()},
    )  # fmt: skip
    pipeline = Pipeline(tmp_path, launcher=launcher)
    try:
        for name, pod in by_name.items():
            pipeline.start(name, pod.argv, local_env(pod, objects, endpoints))
        # The devices, there as in a cluster before the probes: coap-ingest is ready only once
        # it observes one of its resources (a gateway without devices is not ready).
        pipeline.start("simulator", devices_argv(args, names))
        for pod in rendered:
            name = pod.argv[0].removeprefix("fluxgate-")
            probe_until_ok(pod, pipeline, name, timeout=240 if name == "aggregator" else 90)
        deadline = time.monotonic() + 150
        while not all(count > 0 for count in stores.counts().values()):
            assert time.monotonic() < deadline, f"stores after 150 s: {stores.counts()}; dead: {pipeline.dead()}"
            assert not pipeline.dead(), {name: pipeline.tail(name) for name in pipeline.dead()}
            time.sleep(2)
        # The chart's 3 GiB limit, less the 1.5 GiB the job keeps outside its heap.
        assert driver_heap_flag(launcher.pid("aggregator")) == "-Xmx1536m", pipeline.tail("aggregator")
        status = next(pod for pod in rendered if pod.argv[0] == "fluxgate-device-status")
        with urllib.request.urlopen(f"http://127.0.0.1:{status.port}/devices", timeout=5) as reply:
            assert b"ONLINE" in reply.read()
    finally:
        stopped = stop_upstream_first(pipeline, endpoints.bootstrap, timeout=60, names=names)
        stores.close()
        launcher.remove_all()
    assert stopped.exits == dict.fromkeys(stopped.exits, 0), {
        n: pipeline.tail(n) for n, c in stopped.exits.items() if c
    }
