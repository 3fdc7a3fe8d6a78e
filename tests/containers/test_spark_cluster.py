"""The aggregator on a Spark cluster in containers, as a cluster deploy runs it: a standalone
master and a worker, each a container of the aggregator's image (pyspark's own `spark-class`),
and the job's driver in a third (`FLUXGATE_AGG_SPARK__MASTER`, client mode, the jars shipped
from the image to the executors). All three run as the charts' pods do (uid 10001, read-only
root filesystem, no capabilities), the checkpoints on a folder the driver and the worker share
as a cluster shares its checkpoint storage. The rest of the pipeline runs in containers too,
each from its image as the charts' pods run it (uid 10001, a read-only root filesystem, every
capability dropped, only /tmp and its volumes writable): what catches a service that writes
outside its volumes, a file a Dockerfile forgot to copy or a console script an image lacks.
The driver's container is killed once mid-run and started again; every store must then hold
exactly the windows the simulated devices make, and each image's own HEALTHCHECK must pass.
(The aggregator's image in local mode, a pod's default, runs in the compose and rendered-pods
tests; one pipeline run here covers what two did, one per aggregator mode.)"""

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
from containers import CHART_SECURITY, TMPFS_OPTIONS, security_flags
from fluxgate_testing import free_port
from images import podman_env
from spark_class_archive import QUICK_JIT

from fluxgate_aggregator.spark import DEFAULT_CONF, DRIVER_JAVA_OPTIONS

# The images fixture may wait for CI's background build of every image (a fresh machine: minutes).
IMAGES_TIMEOUT_S = 2700
# paired: three JVMs (master, worker, driver) beside the pipeline: beside one other test at most.
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.paired, pytest.mark.downloads,
              pytest.mark.containers, pytest.mark.timeout(IMAGES_TIMEOUT_S)]  # fmt: skip

ROOT = Path(__file__).resolve().parents[2]


def run_daemon(name: str, image: str, args: list[str], volumes: dict[Path, str]) -> None:
    mounts = [arg for host, inside in volumes.items() for arg in ("-v", f"{host}:{inside}")]
    command = ["podman", "run", "--detach", "--rm", "--name", name, "--network", "host", "--no-healthcheck",
               *security_flags(CHART_SECURITY), "--tmpfs", f"/tmp:{TMPFS_OPTIONS}", *mounts,
               "--env", "SPARK_WORKER_DIR=/tmp/work", "--env", "SPARK_LOCAL_DIRS=/tmp",
               # The JIT's quick tier for every JVM of the cluster and its driver, as make test
               # gives the local drivers (docs/testing.md): the optimising compiler's work on
               # Spark's generated code was most of these JVMs' CPU in a job this short.
               "--env", f"SPARK_DAEMON_JAVA_OPTS={QUICK_JIT}",
               "--entrypoint", "spark-class", image, *args]  # fmt: skip
    subprocess.run(command, env=podman_env(), check=True, capture_output=True, timeout=60)


def remove(*names: str) -> None:
    for name in names:
        subprocess.run(["podman", "rm", "--force", "--time", "0", name], env=podman_env(), capture_output=True)


def master_state(ui_port: int) -> dict[str, Any]:
    """The standalone master's own view (its web UI's JSON): workers, applications."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=3) as reply:
            return dict(json.load(reply))
    except OSError:
        return {}


@pytest.fixture
def cluster(images: str, tmp_path: Path) -> Iterator[tuple[str, int, Path]]:
    """``(master URL, its web UI's port, checkpoint folder)`` of a standalone master and one
    worker, in containers."""
    image, run = f"fluxgate/aggregator:{images}", f"spark{tmp_path.name[-8:]}".lower().replace("_", "")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (tmp_path / "checkpoints").chmod(0o777)  # the containers' uid writes the state here
    master, worker = f"{run}-master", f"{run}-worker"
    try:
        run_daemon(master, image, ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(ui_port)], {})  # fmt: skip
        url = f"spark://127.0.0.1:{port}"
        run_daemon(worker, image, ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                   "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui)],
                   {checkpoints: str(checkpoints)})  # fmt: skip
        deadline = time.monotonic() + 120
        while master_state(ui_port).get("aliveworkers", 0) < 1:
            assert time.monotonic() < deadline, subprocess.run(
                ["podman", "logs", master], env=podman_env(), capture_output=True, text=True
            ).stderr[-3000:]
            time.sleep(1)
        yield url, ui_port, checkpoints
    finally:
        remove(worker, master)


def test_the_aggregator_as_a_clusters_driver_makes_every_window_exact(
    cluster: tuple[str, int, Path], stack: Any, tmp_path: Path
) -> None:
    url, ui_port, checkpoints = cluster
    report = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "soak.py"), "--containers", "--spark-master", url,
         "--checkpoints", str(checkpoints), "--plan", "kill:aggregator", "--kill-down", "3", "--calm", "3",
         # The driver's options replace the job's own, so they keep them.
         "--spark-conf", f"{DRIVER_JAVA_OPTIONS}={DEFAULT_CONF[DRIVER_JAVA_OPTIONS]} {QUICK_JIT}",
         "--spark-conf", f"spark.executor.extraJavaOptions={QUICK_JIT}",
         "--mqtt-devices", "6", "--coap-devices", "2",
         "--recover-timeout", "240", "--report", str(report)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    (folder,) = report.glob("soak-*")
    summary = json.loads((folder / "report.json").read_text())
    aggregator = (folder / "aggregator.log").read_text(errors="replace")
    context = f"{summary['problems']}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}\n{aggregator[-3000:]}"
    assert result.returncode == 0, context
    assert summary["unhealthy"] == {}, context
    assert summary["faults"] and all(f["whole_after_s"] is not None for f in summary["faults"]), context
    apps = master_state(ui_port)
    ran = [app["name"] for app in apps.get("completedapps", []) + apps.get("activeapps", [])]
    assert ran, f"no application ran on the cluster: {apps}"
    windows = summary["figures"]["windows"]
    assert windows["expected"] > 0
    assert {windows[store]["held"] for store in ("topic", "elasticsearch", "scylla", "hazelcast")} == {
        windows["expected"]
    }, context
    assert any(checkpoints.rglob("offsets/*")), "the job kept no progress in the shared checkpoint folder"
    assert summary["figures"]["dead_letters"]["distinct_malformed"] > 0
    assert set(summary["exits"]) >= {"mqtt-proxy", "coap-ingest", "aggregator", "device-status", "console"}
    assert not any(summary["exits"].values()), context
