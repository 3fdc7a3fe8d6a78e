"""The `make run` wiring: `fluxgate-sim coap-resources` configures coap-ingest for `fluxgate-sim run`."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fluxgate_testing import consume

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.serde import AvroDecoder

pytestmark = pytest.mark.integration
SIM = Path(sys.executable).with_name("fluxgate-sim")


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("coap_format", ["senml-cbor", "senml-json", "json"])
def test_simulated_fleet_flows_into_kafka(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any], coap_format: str
) -> None:
    readings_topic, _ = topics
    port, prefix = free_udp_port(), f"s{uuid.uuid4().hex[:6]}-"
    common = ["--coap-devices", "2", "--metrics", "temperature,humidity", "--coap-port", str(port)]
    common += ["--device-prefix", prefix]
    listed = subprocess.run([str(SIM), "coap-resources", *common], capture_output=True, check=True, timeout=30)
    resources = json.loads(listed.stdout)
    assert len(resources) == 4
    wanted = {(f"{prefix}coap-{n:04d}", metric) for n in (1, 2) for metric in ("temperature", "humidity")}

    def every_resource_sent(records: list[ConsumedRecord]) -> bool:
        return len(records) >= 20 and wanted <= {
            (r.record["device_id"], r.record["metric"]) for r in records if r.record
        }

    run = [str(SIM), "run", *common, "--rate", "5", "--duration", "120", "--seed", "3", "--coap-format", coap_format]
    simulator = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ingest = start_ingest(resources, READINESS="all")
        ingest.wait_ready()
        records = consume(
            stack.bootstrap, readings_topic, decoder=decoder, timeout=30, idle=0, complete=every_resource_sent
        )
        assert ingest.terminate() == 0
    finally:
        simulator.send_signal(signal.SIGTERM)
        out, err = simulator.communicate(timeout=30)
        print(f"simulator exited {simulator.returncode}:\n{err.decode(errors='replace')[-3000:]}")  # shown on failure
    assert simulator.returncode == 0, err
    assert json.loads(out)["sent"]["ok"] >= 20
    readings = [r.record for r in records if r.record]
    assert {(r["device_id"], r["metric"]) for r in readings} == wanted
    assert {r["unit"] for r in readings if r["metric"] == "temperature"} == {"Cel"}
    assert all(10 < r["value"] < 35 for r in readings if r["metric"] == "temperature")
    assert all(0 <= r["value"] <= 100 for r in readings if r["metric"] == "humidity")
