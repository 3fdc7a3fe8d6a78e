"""`make run SECURED=1`'s CoAP hop without the rest of the run: the simulated CoAP devices
serving DTLS with the run's pre-shared key, and coap-ingest observing them, both configured by
run_pipeline's own functions (the key file and settings of ``secured_coap``, the devices'
options of ``secured_devices``, the ``coaps://`` resource list of ``coap_resources_of``), on
names of their own (``Names`` with a prefix) against the shared Kafka. Readings arrive; a wrong
key never yields one, and coap-ingest stays not ready; the key shows in no log and no metric;
devices restarted (their DTLS session forgotten) are observed again."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import run_pipeline
from fluxgate_testing import ServiceProcess, consume, free_port
from run_pipeline import (
    BIN,
    Names,
    coap_resources_of,
    devices_argv,
    parse_args,
    prefixed,
    secured_coap,
    secured_devices,
)

from fluxgate_core.kafka import ensure_topics
from fluxgate_core.serde import AvroDecoder
from fluxgate_sim.signals import METRICS

pytestmark = pytest.mark.integration

COAP_DEVICES = 2


@pytest.fixture
def names(stack: Any) -> Names:
    names = Names(prefix=f"dtls{uuid.uuid4().hex[:8]}.")
    topics = {names.readings: 1, names.topic("sensors.deadletter"): 1}
    ensure_topics({"bootstrap.servers": stack.bootstrap}, topics, replication=1)
    return names


@pytest.fixture
def run_args() -> Any:
    port = free_port(socket.SOCK_DGRAM)
    # --secured as `make run SECURED=1` passes it; CoAP devices only, every reading well formed.
    return parse_args(["--secured", "--mqtt-devices", "0", "--coap-devices", str(COAP_DEVICES),
                       "--coap-port", str(port), "--rate", "2", "--malformed", "0", "--late", "0"])  # fmt: skip


@pytest.fixture
def dtls(tmp_path: Path) -> dict[str, str]:
    """coap-ingest's DTLS settings as the secured run makes them (``secured_coap`` writes the key)."""
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    return secured_coap(secrets)


@pytest.fixture
def devices(run_args: Any, names: Names, tmp_path: Path, dtls: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """The simulator as the secured run starts it, reading the key ``dtls`` wrote."""
    secrets = tmp_path / "secrets"
    argv = devices_argv(run_args, names, secured_devices(secrets))
    log = (tmp_path / "simulator.log").open("ab")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    # Serving before coap-ingest starts: a handshake refused by a closed port is another case.
    deadline = time.monotonic() + 30
    while not bound(run_args.coap_port):
        assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "simulator.log").read_text()
        time.sleep(0.1)
    yield process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
    log.close()


def bound(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def ingest(stack: Any, run_args: Any, names: Names, tmp_path: Path, dtls: dict[str, str]) -> ServiceProcess:
    """coap-ingest with start_all's settings for it (plain Kafka and registry: this test is
    about the CoAP hop) and ``dtls``."""
    health = free_port()
    env = {"LOG__JSON_OUTPUT": "false", **names.env("coap-ingest"), "RESOURCES": coap_resources_of(run_args, names),
           "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, "REGISTRY__URL": stack.registry_url,
           "HTTP__HOST": "127.0.0.1", "HTTP__PORT": str(health), **dtls}  # fmt: skip
    process = ServiceProcess(
        [str(BIN / "fluxgate-coap-ingest")],
        prefixed("FLUXGATE_COAP_", env),
        health_port=health,
        log_path=tmp_path / f"coap-ingest-{uuid.uuid4().hex[:6]}.log",
        isolate_prefix="FLUXGATE_COAP_",
    )
    return process.start(wait_ready=False)


def the_runs_key(tmp_path: Path) -> str:
    key_file = tmp_path / "secrets" / run_pipeline.COAP_PSK_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    return key_file.read_text()


def test_readings_arrive_over_dtls_with_the_runs_key(
    stack: Any, registry_client: Any, run_args: Any, names: Names, devices: Any, dtls: dict[str, str], tmp_path: Path
) -> None:
    resources = json.loads(coap_resources_of(run_args, names))
    assert len(resources) == COAP_DEVICES * len(METRICS)
    assert all(r["uri"].startswith(f"coaps://127.0.0.1:{run_args.coap_port}/") for r in resources)
    key = the_runs_key(tmp_path)
    assert key not in " ".join(devices.args)  # the devices read it from the file, not the command line
    # coap-ingest reads the key from the devices' file, not from a variable.
    assert dtls == {"DTLS__PSK_IDENTITY": run_pipeline.COAP_PSK_IDENTITY,
                    "DTLS__PSK_KEY_FILE": str(tmp_path / "secrets" / run_pipeline.COAP_PSK_FILE)}  # fmt: skip
    gateway = ingest(stack, run_args, names, tmp_path, dtls)
    gateway.wait_ready()
    device_prefix = names.prefix.replace(".", "-")
    wanted = {(f"{device_prefix}coap-{d:04d}", metric) for d in range(1, COAP_DEVICES + 1) for metric in METRICS}

    def complete(records: list[Any]) -> bool:  # two readings of every device's every metric
        seen = [(r.record["device_id"], r.record["metric"]) for r in records]
        return all(seen.count(resource) >= 2 for resource in wanted)

    readings = consume(
        stack.bootstrap, names.readings, decoder=AvroDecoder(registry_client), complete=complete, timeout=60, idle=0
    )
    metrics = gateway.metrics()
    assert gateway.terminate() == 0
    assert complete(readings), [(r.record["device_id"], r.record["metric"]) for r in readings]
    assert {r.record["source"] for r in readings} == {r["uri"] for r in resources}  # each came over coaps://
    assert key not in gateway.log_text() and key not in metrics


@pytest.mark.parametrize("wrong", ["DTLS__PSK_KEY", "DTLS__PSK_IDENTITY"])
def test_a_wrong_key_or_identity_never_yields_a_reading(
    stack: Any, run_args: Any, names: Names, devices: Any, tmp_path: Path, wrong: str
) -> None:
    dtls = {"DTLS__PSK_IDENTITY": run_pipeline.COAP_PSK_IDENTITY, "DTLS__PSK_KEY": the_runs_key(tmp_path)}
    dtls[wrong] = "not-the-runs"
    gateway = ingest(stack, run_args, names, tmp_path, dtls)

    def failed_attempts() -> float:
        name = "fluxgate_coap_reregistrations_total"
        return sum(gateway.metric(name, host="127.0.0.1", reason=reason) for reason in ("error", "timeout"))

    # Every resource's registration has failed at least once (each waits its request timeout).
    gateway.wait_until(lambda: failed_attempts() >= COAP_DEVICES * len(METRICS), "every handshake to fail", timeout=60)
    time.sleep(2)  # the devices notify twice a second: a reading would be here by now
    assert gateway.get("/readyz")[0] == 503
    assert consume(stack.bootstrap, names.readings, timeout=3, idle=0) == []
    log = gateway.log_text()
    assert gateway.terminate() == 0
    assert "observation.ended" in log and "coaps://" in log


def test_readings_come_back_after_the_devices_restart(
    stack: Any, run_args: Any, names: Names, devices: Any, tmp_path: Path
) -> None:
    # Restarted devices have forgotten the DTLS session: coap-ingest notices the silence and
    # shakes hands anew (the plain-CoAP case is test_libcoap.py's).
    dtls = {"DTLS__PSK_IDENTITY": run_pipeline.COAP_PSK_IDENTITY, "DTLS__PSK_KEY": the_runs_key(tmp_path)}
    gateway = ingest(stack, run_args, names, tmp_path, {**dtls, "OBSERVE__MAX_AGE_S": "3"})
    gateway.wait_ready()
    os.killpg(devices.pid, signal.SIGKILL)
    devices.wait(10)
    gateway.wait_until(lambda: gateway.get("/readyz")[0] == 503, "the observations to be noticed lost")
    before = len(consume(stack.bootstrap, names.readings, timeout=5, idle=1))
    again = subprocess.Popen(devices.args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        gateway.wait_ready(timeout=60)
        every_resource_again = len(METRICS) * COAP_DEVICES
        after = consume(stack.bootstrap, names.readings, timeout=30, idle=0, expected=before + every_resource_again)
    finally:
        os.killpg(again.pid, signal.SIGTERM)
        again.wait(30)
    assert gateway.terminate() == 0
    assert len(after) >= before + every_resource_again
