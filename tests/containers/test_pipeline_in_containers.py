"""The pipeline with every service in a real container from its image (`make images`), as the
charts' pods run it: uid 10001, a read-only root filesystem, every capability dropped, no
privilege escalation, only /tmp (and the aggregator's home and checkpoints) writable. The
soak's own pipeline (prefixed names) runs with a killed aggregator container, the simulated
devices send, and every store must then hold exactly the windows they make; each image's
own HEALTHCHECK must pass while it runs. This is what catches a service that writes
outside its volumes, a file the Dockerfile forgot to copy, or a console script the image
lacks: none of it shows when the services run from the venv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# downloads: the images install their packages from PyPI, Debian and Maven Central.
# The images fixture may wait for CI's background build of every image (a fresh machine: minutes).
IMAGES_TIMEOUT_S = 2700
# serial: nine containers and a Spark job beside another worker's tests made those miss their timing.
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.serial, pytest.mark.downloads,
              pytest.mark.containers, pytest.mark.timeout(IMAGES_TIMEOUT_S)]  # fmt: skip

ROOT = Path(__file__).resolve().parents[2]


def test_every_store_exact_with_every_service_in_its_container(images: str, stack: Any, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "soak.py"), "--containers", "--plan", "kill:aggregator",
         "--kill-down", "3", "--calm", "3", "--mqtt-devices", "6", "--coap-devices", "2",
         "--recover-timeout", "180", "--report", str(tmp_path)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    (folder,) = tmp_path.glob("soak-*")
    report = json.loads((folder / "report.json").read_text())
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(folder.glob("*.log")))
    context = f"{report['problems']}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}\n{logs}"
    assert result.returncode == 0, context
    assert report["unhealthy"] == {}, context
    assert all(f["whole_after_s"] is not None for f in report["faults"]), context
    windows = report["figures"]["windows"]
    assert windows["expected"] > 0
    assert {windows[store]["held"] for store in ("topic", "elasticsearch", "scylla", "hazelcast")} == {
        windows["expected"]
    }, context
    assert report["figures"]["dead_letters"]["distinct_malformed"] > 0
    assert set(report["exits"]) >= {"mqtt-proxy", "coap-ingest", "aggregator", "device-status", "console"}
    assert not any(report["exits"].values()), context
