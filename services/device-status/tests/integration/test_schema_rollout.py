"""A gateway rolled out with a new, compatible SensorReading (issue 36 §2): device-status
reads its readings as soon as they come (the writer schema is fetched by id when first met),
and while the registry is out of reach such a reading waits and is read, never skipped."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from fluxgate_testing import free_port

from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder, register, value_subject

from .conftest import Fleet, device

pytestmark = pytest.mark.integration


class RegistryGate:
    """A TCP relay in front of the registry that the test opens and closes: :meth:`close`
    ends the connections open through it (kept alive by the client) and, until :meth:`open`,
    hangs up on every new one, as a registry restarting or out of reach looks to a client."""

    def __init__(self, registry_url: str) -> None:
        parts = urlsplit(registry_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.port = free_port()
        self.url = urlunsplit(parts._replace(netloc=f"127.0.0.1:{self.port}"))
        self.closed = threading.Event()
        self.hung_up = 0
        self._relayed: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, name="registry-gate", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # stopped
            if self.closed.is_set():
                self.hung_up += 1
                client.close()
                continue
            upstream = socket.create_connection(self._target)
            self._relayed += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self.closed.set()
        for end in self._relayed:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        self._relayed.clear()

    def open(self) -> None:
        self.closed.clear()

    def stop(self) -> None:
        self._listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            end.close()


@pytest.fixture
def gate(stack: Any) -> Iterator[RegistryGate]:
    opened = RegistryGate(stack.registry_url)
    yield opened
    opened.stop()


def register_v2(fleet: Fleet) -> AvroEncoder:
    """SensorReading v2: v1 plus an optional ``firmware`` (BACKWARD compatible), registered now."""
    newer = schema_dict(SENSOR_READING)
    newer["fields"] = [*newer["fields"], {"name": "firmware", "type": ["null", "string"], "default": None}]
    schema_id = register(fleet.registry_client, value_subject(fleet.readings_topic), json.dumps(newer), "BACKWARD")
    return AvroEncoder(newer, schema_id)


def readings_of(service: Any, device_id: str) -> int:
    status, state = device(service, device_id)
    return int(state.get("readings", 0)) if status == 200 else 0


def test_readings_of_a_version_registered_mid_run_are_read_at_once(fleet: Fleet) -> None:
    with fleet.service() as service:
        service.start()
        fleet.send("dev-a", 20.0)
        service.wait_until(lambda: readings_of(service, "dev-a") == 1, "dev-a's v1 reading")
        v2 = register_v2(fleet)
        for _ in range(10):
            fleet.send("dev-a", 21.0, encoder=v2)
            fleet.send("dev-b", 22.0, encoder=v2)
            fleet.send("dev-a", 23.0)
        service.wait_until(lambda: (readings_of(service, "dev-a"), readings_of(service, "dev-b")) == (21, 10), "all")
        assert service.metric("fluxgate_status_undecodable_total") == 0
        assert service.terminate() == 0


def test_a_reading_met_while_the_registry_is_unreachable_waits_for_it_and_is_read(
    fleet: Fleet, gate: RegistryGate
) -> None:
    with fleet.service(registry_url=gate.url) as service:
        service.start()
        fleet.send("dev-a", 20.0)
        service.wait_until(lambda: readings_of(service, "dev-a") == 1, "dev-a's v1 reading")
        gate.close()
        v2 = register_v2(fleet)
        fleet.send("dev-b", 22.0, encoder=v2)
        fleet.send("dev-a", 21.0)
        # The outage outlasts the registry client's own retries in one decode, and the service's
        # first try again: it ends once the reading has waited for the registry twice.
        waits = "fluxgate_status_registry_waits_total"
        service.wait_until(lambda: service.metric(waits) >= 2, "the reading waiting for the registry twice", 60)
        assert gate.hung_up >= 2 and readings_of(service, "dev-b") == 0
        gate.open()

        service.wait_until(lambda: (readings_of(service, "dev-a"), readings_of(service, "dev-b")) == (2, 1), "both")
        assert service.metric("fluxgate_status_undecodable_total") == 0
        assert service.metric("fluxgate_status_registry_waits_total") >= 1
        assert service.terminate() == 0
