"""coap-ingest as a real subprocess against the real stack, plus CoAP servers on free ports."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.serde import AvroDecoder

INGEST = Path(sys.executable).with_name("fluxgate-coap-ingest")


def is_free(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_coap_port(pair: bool = False) -> int:
    """A port free for UDP and TCP (libcoap's -p binds both), and P+1 too when ``pair`` (DTLS)."""
    for _ in range(100):
        port = free_port(socket.SOCK_DGRAM)
        if is_free(port, socket.SOCK_STREAM) and (not pair or (port < 65535 and is_free(port + 1, socket.SOCK_DGRAM))):
            return port
    raise RuntimeError("no free port for a CoAP server")


@pytest.fixture
def topics(stack: Any) -> tuple[str, str]:
    """A fresh readings topic and a fresh dead-letter topic."""
    return unique_topic("test.coap.readings", stack.bootstrap), unique_topic("test.coap.dlq", stack.bootstrap)


@pytest.fixture
def udp_pair() -> int:
    return free_coap_port(pair=True)


@pytest.fixture
def decoder(registry_client: Any) -> AvroDecoder:
    return AvroDecoder(registry_client)


@pytest.fixture
def read_readings(stack: Any, topics: tuple[str, str], decoder: AvroDecoder) -> Callable[..., list[ConsumedRecord]]:
    """``consume`` of the test's readings topic, decoded, with its other keywords (timeout 30 s unless given)."""

    def read(**options: Any) -> list[ConsumedRecord]:
        return consume(stack.bootstrap, topics[0], decoder=decoder, **{"timeout": 30.0, **options})

    return read


@pytest.fixture
def start_ingest(stack: Any, topics: tuple[str, str], tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """Start coap-ingest observing ``resources`` (topic defaults to the test's readings topic; None:
    the test sets KCQL instead);
    it is not waited for: ``wait_ready()`` when the test needs it ready."""
    started: list[ServiceProcess] = []

    def start(resources: list[dict[str, Any]] | None, **settings: str) -> ServiceProcess:
        readings, dead_letters = topics
        health_port = free_port()
        env = {
            "FLUXGATE_COAP_RESOURCES": json.dumps([{"topic": readings, **resource} for resource in resources or ()]),
            "FLUXGATE_COAP_DEADLETTER_TOPIC": dead_letters,
            "FLUXGATE_COAP_KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
            "FLUXGATE_COAP_REGISTRY__URL": stack.registry_url,
            "FLUXGATE_COAP_HTTP__HOST": "127.0.0.1",
            "FLUXGATE_COAP_HTTP__PORT": str(health_port),
            "FLUXGATE_COAP_LOG__LEVEL": "DEBUG",
            "FLUXGATE_COAP_OBSERVE__BACKOFF_INITIAL_S": "0.2",
            "FLUXGATE_COAP_OBSERVE__BACKOFF_MAX_S": "1.0",
            "FLUXGATE_COAP_OBSERVE__REQUEST_TIMEOUT_S": "2",
            **{f"FLUXGATE_COAP_{key.upper()}": value for key, value in settings.items()},
        }
        if resources is None:  # KCQL instead (FLUXGATE_COAP_KCQL): setting both is an error
            del env["FLUXGATE_COAP_RESOURCES"]
        log_path = tmp_path / f"coap-ingest-{len(started)}.log"
        ingest = ServiceProcess(
            [str(INGEST)], env, health_port=health_port, log_path=log_path, isolate_prefix="FLUXGATE_COAP_"
        )
        started.append(ingest.start(wait_ready=False))
        return ingest

    yield start
    for ingest in started:
        ingest.kill()


@dataclass
class LibcoapServer:
    """libcoap's example server (``coap-server-notls`` or a DTLS build) on a port of ours."""

    binary: str
    port: int
    extra: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> LibcoapServer:
        command = [self.binary, "-A", "127.0.0.1", "-p", str(self.port), "-d", "20", *self.extra]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.put_until_up("/.fluxgate-probe", b"0")
        return self

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def put(self, path: str, payload: bytes, content_format: str = "json") -> None:
        uri = f"coap://127.0.0.1:{self.port}{path}"
        command = ["coap-client-notls", "-m", "put", "-t", content_format, "-e", payload.decode(), "-B", "3", uri]
        done = subprocess.run(command, capture_output=True, timeout=10, check=False)
        assert done.returncode == 0, done.stderr

    def put_until_up(self, path: str, payload: bytes, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.put(path, payload)
                return
            except (AssertionError, subprocess.TimeoutExpired):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@pytest.fixture
def libcoap() -> Iterator[Callable[..., LibcoapServer]]:
    servers: list[LibcoapServer] = []

    def start(binary: str = "coap-server-notls", port: int | None = None, extra: tuple[str, ...] = ()) -> LibcoapServer:
        found = shutil.which(binary)
        assert found, f"{binary} missing: `fluxgate-stack install` (Debian libcoap3-bin) provides it"
        server = LibcoapServer(found, port or free_coap_port(), extra).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.kill()
