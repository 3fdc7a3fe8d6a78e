"""The CoAP source of the documents, run by ``fluxgate connect`` unchanged (server address and
topic by ``${VAR}``): coap-ingest observes ``/sensors`` on a real CoAP server (libcoap) and writes
each notification as Stream-Reactor's CoAP record (``coap-message``), the payload as bytes.

Needs issue #23's source-KCQL and CoAP-record work in coap-ingest (``FLUXGATE_COAP_KCQL``,
``FLUXGATE_COAP_SOURCE_URI``, ``FLUXGATE_COAP_OUTPUT_FORMAT``): it fails until that is merged.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from connect_runs import connect
from fluxgate_testing import consume, free_port, unique_topic

from fluxgate_core.serde import AvroDecoder

pytestmark = pytest.mark.integration


@pytest.fixture
def coap_server() -> Iterator[int]:
    """libcoap's example server on a free UDP port; PUT creates observable resources (``-d``)."""
    binary = shutil.which("coap-server-notls")
    assert binary, "coap-server-notls missing: `fluxgate-stack install` (Debian libcoap3-bin) provides it"
    port = free_port(socket.SOCK_DGRAM)
    server = subprocess.Popen([binary, "-A", "127.0.0.1", "-p", str(port), "-d", "20"], stderr=subprocess.DEVNULL)
    yield port
    server.kill()
    server.wait(10)


def put(port: int, payload: bytes, timeout: float = 10.0) -> None:
    """PUT ``payload`` to /sensors, retrying while the server starts."""
    command = ["coap-client-notls", "-m", "put", "-t", "json", "-e", payload.decode(), "-B", "3",
               f"coap://127.0.0.1:{port}/sensors"]  # fmt: skip
    deadline = time.monotonic() + timeout
    while subprocess.run(command, capture_output=True, timeout=10, check=False).returncode != 0:
        assert time.monotonic() < deadline, "the CoAP server did not take a PUT"
        time.sleep(0.1)


def test_the_coap_source_config_writes_coap_messages(stack: Any, registry_client: Any, coap_server: int) -> None:
    topic = unique_topic("connect.coap_sensor_topic", stack.bootstrap, 1)
    first, second = b'{"sensorId": "s-1", "temperature": 20.5}', b'{"sensorId": "s-1", "temperature": 21}'
    put(coap_server, first)
    placeholders = {"COAP_HOST": "127.0.0.1", "COAP_PORT": str(coap_server), "COAP_SENSOR_TOPIC": topic}
    with connect("coap-source.properties", "FLUXGATE_COAP_", stack, placeholders) as ingest:
        ingest.start()
        records = consume(stack.bootstrap, topic, expected=1, decoder=AvroDecoder(registry_client), timeout=30)
        assert records, f"nothing on {topic}: {ingest.log_tail()}"
        put(coap_server, second)
        records = consume(stack.bootstrap, topic, expected=2, decoder=AvroDecoder(registry_client), timeout=30)
        assert ingest.terminate() == 0, ingest.log_tail()
    assert [record.record["payload"] for record in records] == [first, second]
    assert "running coap-ingest" in ingest.log_text()
