"""`make run` end to end: simulated devices over MQTT and CoAP, both gateways, the Spark
job and the Elasticsearch persister, on the local stack; readings, dead letters and
aggregates must all reach Kafka, aggregates Elasticsearch, and every service must stop
cleanly on SIGTERM."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fluxgate_core.testing import free_port

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


def test_make_run_moves_readings_to_aggregates(stack: Any) -> None:
    coap_port = free_port(socket.SOCK_DGRAM)
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_pipeline.py"), "--check", "--duration", "70",
         "--window", "5 seconds", "--watermark", "5 seconds", "--malformed", "0.05", "--coap-port", str(coap_port)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, f"{summary}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert summary["arrived"]["sensors.readings"] > 1000, summary
    assert summary["exits"] == dict.fromkeys(
        ["aggregator", "coap-ingest", "es-persister", "mqtt-proxy", "simulator"], 0
    )
    assert summary["documents"]["elasticsearch"] > 0, summary  # aggregates reached the daily indices
