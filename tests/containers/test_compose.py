"""docker-compose.yml's services, run for real: the compose file we ship, with an override
(`compose.local-stack.yml`) that only puts them in front of the local stack's servers, whose
official images cannot be pulled here. podman-compose starts every service from its image
(`make images`) with compose's environment, command, volumes and health check; each image's
health check must pass, the simulated devices' readings must reach every store, and each
service must stop with exit code 0 within its stop_grace_period."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_stores import Stores
from run_pipeline import Names, devices_argv, parse_args

from fluxgate_stack import ensure_up

# fixed_names: compose's services use the default topics, groups, store targets and ports
# (9101-9109), as `make run` and the end-to-end tests do.
# The images fixture may wait for CI's background build of every image (a fresh machine: minutes).
IMAGES_TIMEOUT_S = 2700
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.paired, pytest.mark.fixed_names,
              pytest.mark.downloads, pytest.mark.containers, pytest.mark.timeout(IMAGES_TIMEOUT_S)]  # fmt: skip

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "fluxgate-ctest"
SERVICES = ("mqtt-proxy", "coap-ingest", "aggregator", "es-persister", "scylla-persister", "hazelcast-persister",
            "device-status", "console")  # fmt: skip


def compose(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    from images import podman_env

    command = [str(Path(sys.executable).parent / "podman-compose"), "-p", PROJECT, "-f", "docker-compose.yml",
               "-f", "tests/containers/compose.local-stack.yml", *args]  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env=podman_env(), capture_output=True, text=True, timeout=timeout)


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    from images import podman_env

    return subprocess.run(["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=60)


def container(service: str) -> str:
    return f"{PROJECT}_{service}_1"


@pytest.fixture
def composed(images: str, stack: Any, elasticsearch: str, cassandra: Any, hazelcast: Any) -> Iterator[None]:
    # Volumes too: the aggregator's checkpoint volume outlives a run, and the next run's stack is
    # a fresh Kafka, so the job found its offsets "lost" (the partition went back) and was unhealthy.
    compose("down", "--volumes", "--timeout", "5")  # a run killed before its teardown
    started = compose("up", "--detach", "--no-deps", "--no-build", *SERVICES)
    try:
        assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
        yield
    finally:
        compose("down", "--volumes", "--timeout", "5")


def logs(service: str) -> str:
    result = podman("logs", "--tail", "30", container(service))
    return f"--- {service}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"


def wait_healthy(timeout: float) -> None:
    """Each service's own HEALTHCHECK, run by the engine (no systemd timers here to run it)."""
    deadline, failing = time.monotonic() + timeout, list(SERVICES)
    while failing and time.monotonic() < deadline:
        failing = [service for service in failing if podman("healthcheck", "run", container(service)).returncode]
        time.sleep(2 if failing else 0)
    assert not failing, "\n".join(logs(service) for service in failing)


def test_compose_services_pass_their_health_checks_and_every_store_fills(composed: None, tmp_path: Path) -> None:
    endpoints = ensure_up(["kafka", "registry", "mosquitto", "elasticsearch", "cassandra", "hazelcast"])
    stores = Stores(endpoints)
    before = stores.counts()
    wait_healthy(timeout=240)
    args = parse_args(["--mqtt-devices", "4", "--coap-devices", "0", "--duration", "150"])
    simulator = subprocess.Popen(devices_argv(args, Names()), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # compose's windows: 1 minute, closed 30 s of event time after their end.
        deadline = time.monotonic() + 180
        while not all(count > before[store] for store, count in stores.counts().items()):
            assert time.monotonic() < deadline, f"{stores.counts()} after {before}\n" + "\n".join(map(logs, SERVICES))
            time.sleep(3)
        with urllib.request.urlopen("http://127.0.0.1:9107/devices", timeout=5) as devices:
            assert b"ONLINE" in devices.read()
    finally:
        simulator.terminate()
        simulator.wait(30)
        stores.close()
    stopped = compose("stop", *SERVICES, timeout=180)
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    exits = {s: json.loads(podman("inspect", "--format", "{{.State.ExitCode}}", container(s)).stdout) for s in SERVICES}
    assert exits == dict.fromkeys(SERVICES, 0), "\n".join(logs(s) for s, code in exits.items() if code)
