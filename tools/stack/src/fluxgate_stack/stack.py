"""The lifecycle shared by every server: install, start or reuse, wait until ready, stop.

`up` starts every requested server first and only then waits for each, so the JVMs boot
side by side. Only processes recorded in our pidfiles are ever signalled.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fluxgate_stack import fetch, process, servers
from fluxgate_stack.errors import PortInUse, ServerNotReady
from fluxgate_stack.pki import Pki
from fluxgate_stack.process import PidRecord
from fluxgate_stack.servers import Server
from fluxgate_stack.servers.registry import CCOMPAT_PATH
from fluxgate_stack.settings import StackSettings

log = logging.getLogger("fluxgate_stack")
POLL_SECONDS = 0.25
PORT_RELEASE_SECONDS = 5.0


@dataclass(frozen=True)
class Endpoints:
    """Where clients reach the stack."""

    bootstrap: str
    registry_url: str
    mqtt_host: str
    mqtt_port: int
    coap_url: str
    elasticsearch_url: str
    cassandra_host: str
    cassandra_port: int
    hazelcast_address: str
    hazelcast_cluster: str
    # Kafka's SASL_SSL listener and the CA its certificate comes from. Defaults and a text path:
    # endpoints saved as JSON (tools/soak_check.py) before these existed still load, and save.
    secure_bootstrap: str = ""
    ca_path: str = ""
    # The secured stores (servers elasticsearch-secured, cassandra-secured, registry-secured):
    # TLS from the same CA, and users; see fluxgate_stack.security.
    secure_elasticsearch_url: str = ""
    secure_cassandra_port: int = 0
    secure_registry_url: str = ""
    prometheus_url: str = ""  # the stack's Prometheus (its API, /alerts)

    @property
    def ca_file(self) -> Path:
        """The stack CA's certificate (PEM): what SASL_SSL clients trust (``ssl.ca.location``)."""
        return Path(self.ca_path)

    @property
    def cassandra_contact_point(self) -> str:
        """``host:port`` of the CQL native protocol, e.g. ``127.0.0.1:9042``."""
        return f"{self.cassandra_host}:{self.cassandra_port}"

    @classmethod
    def from_settings(cls, settings: StackSettings) -> Endpoints:
        host = settings.host
        return cls(
            bootstrap=f"{host}:{settings.kafka_port}",
            registry_url=f"http://{host}:{settings.registry_port}{CCOMPAT_PATH}",
            mqtt_host=host,
            mqtt_port=settings.mqtt_port,
            coap_url=f"coap://{host}:{settings.coap_port}",
            elasticsearch_url=f"http://{host}:{settings.es_port}",
            cassandra_host=host,
            cassandra_port=settings.cassandra_port,
            hazelcast_address=f"{host}:{settings.hazelcast_port}",
            hazelcast_cluster=settings.hazelcast_cluster,
            secure_bootstrap=f"{host}:{settings.kafka_secure_port}",
            ca_path=str(Pki(settings.pki_dir).ca_cert),
            secure_elasticsearch_url=f"https://{host}:{settings.es_secure_port}",
            secure_cassandra_port=settings.cassandra_secure_port,
            secure_registry_url=f"https://{host}:{settings.registry_secure_port}{CCOMPAT_PATH}",
            prometheus_url=f"http://{host}:{settings.prometheus_port}",
        )


@dataclass(frozen=True)
class ServerStatus:
    name: str
    state: str  # ready | starting | external | stopped | dead
    pid: int | None
    ports: str


class Stack:
    def __init__(self, settings: StackSettings | None = None) -> None:
        self.settings = settings or StackSettings()

    def endpoints(self) -> Endpoints:
        return Endpoints.from_settings(self.settings)

    def install(self, names: list[str] | None = None) -> None:
        """Fetch what the servers need (all servers if ``names`` is empty); cached and idempotent."""
        self._install(servers.build(names, self.settings, all_if_empty=True))

    def up(self, names: list[str] | None = None) -> Endpoints:
        """Start (or reuse) the servers, wait until each is ready, then provision them."""
        chosen = servers.build(servers.with_requirements(names), self.settings)
        with self._lock():
            self._install(chosen)
            for server in chosen:  # before anything starts: one line on what cannot work and how to fix it
                server.check_reachable()
            launched: dict[str, tuple[Server, PidRecord | None]] = {}
            ready: set[str] = set()
            for server in chosen:
                # Independent servers start together (the JVMs overlap); one that needs
                # another (the registry's journal is in Kafka) waits for it first.
                self._ready(server.requires, launched, ready)
                launched[server.name] = (server, self._launch(server))
            self._ready(list(launched), launched, ready)
        return self.endpoints()

    def _ready(
        self, names: Iterable[str], launched: dict[str, tuple[Server, PidRecord | None]], ready: set[str]
    ) -> None:
        """Wait for each launched server in ``names`` and provision it, once."""
        for name in names:
            if name in launched and name not in ready:
                server, record = launched[name]
                self._wait_ready(server, record)
                server.provision()
                ready.add(name)

    def down(self, names: list[str] | None = None, wipe: bool = False) -> None:
        """Stop the servers we started (all of them if ``names`` is empty); ``wipe`` deletes data."""
        with self._lock():
            for server in reversed(servers.build(names, self.settings, all_if_empty=True)):
                self._stop(server)
                if wipe:
                    server.wipe()
                    log.info("server=%s event=wiped path=%s", server.name, server.data_dir)

    def purge(self) -> list[Path]:
        """Stop every server and delete what the stack keeps for this checkout: its ``.local``
        and the folders outside the checkout that unprivileged servers use; the folders gone."""
        self.down()
        homes = {server.dist_dir.parent for server in servers.build(None, self.settings, all_if_empty=True)}
        gone = []
        for home in sorted(homes | {self.settings.local_dir}):
            for part in ("dist", "run", "data", "build", "pki"):
                shutil.rmtree(home / part, ignore_errors=True)
            with contextlib.suppress(OSError):  # a folder the user chose may hold more: kept then
                home.rmdir()
            gone.append(home)
        return gone

    def kill(self, name: str) -> None:
        """SIGKILL one server, as a crash would; `up`/`start` brings it back on the same data."""
        (server,) = servers.build([name], self.settings)
        record = process.read_pidfile(server.pid_file)
        if record is not None:
            process.kill(record)
            server.pid_file.unlink(missing_ok=True)
            self._wait_ports_released(server)
            log.info("server=%s event=killed pid=%d", server.name, record.pid)

    def status(self) -> list[ServerStatus]:
        return [self._status(server) for server in servers.build(None, self.settings, all_if_empty=True)]

    def _install(self, chosen: list[Server]) -> None:
        missing = [server for server in chosen if not server.is_installed()]
        packages = {binary: package for server in missing for binary, package in server.debian_packages.items()}
        packages.update(
            (binary, package)
            for server in chosen
            for binary, package in server.toolchain().items()
            if fetch.find_binary(binary) is None
        )
        if packages:
            started = time.monotonic()
            fetch.ensure_debian_packages(packages)  # one apt-get run for all servers
            log.info(
                "event=debian-packages packages=%s seconds=%.1f",
                ",".join(sorted(set(packages.values()))),
                time.monotonic() - started,
            )
        for server in (server for server in missing if not server.is_installed()):
            started = time.monotonic()
            server.install()
            log.info("server=%s event=installed seconds=%.1f", server.name, time.monotonic() - started)

    def _launch(self, server: Server) -> PidRecord | None:
        """Start ``server`` unless it runs already; ``None`` means someone else's server answers."""
        record = process.read_pidfile(server.pid_file)
        fingerprint = server.fingerprint()
        if record is not None and process.is_alive(record):
            if record.fingerprint in server.fingerprints_served():
                log.info("server=%s event=reused pid=%d", server.name, record.pid)
                return record
            # Settings changed (port, version, heap...): the running one is not what was asked for.
            log.info("server=%s event=restarting reason=configuration-changed", server.name)
            self._stop(server)
        server.pid_file.unlink(missing_ok=True)  # stale: the process is gone
        busy = [port for port in server.ports() if not process.port_free(self.settings.host, port.number, port.proto)]
        if busy:
            if server.probe():
                log.info("server=%s event=external note=not-started-by-us-so-down-leaves-it", server.name)
                return None
            taken = ", ".join(f"{port.number}/{port.proto}" for port in busy)
            raise PortInUse(f"{server.name}: port {taken} is held by another process that is not a ready {server.name}")
        server.configure()
        record = process.spawn(server.command(), cwd=server.run_dir, log_file=server.log_file, env=server.process_env())
        record = dataclasses.replace(record, fingerprint=fingerprint)
        process.write_pidfile(server.pid_file, record)
        log.info("server=%s event=started pid=%d log=%s", server.name, record.pid, server.log_file)
        return record

    def _wait_ready(self, server: Server, record: PidRecord | None) -> None:
        started = time.monotonic()
        deadline = started + server.timeout
        while not server.probe():
            if record is not None and not process.is_alive(record):
                server.pid_file.unlink(missing_ok=True)
                raise ServerNotReady(server.name, "exited during start-up", process.tail(server.log_file))
            if time.monotonic() > deadline:
                # Stopped so the next `up` starts clean; the log stays for the post-mortem.
                self._stop(server)
                reason = f"not ready after {server.timeout:.0f}s (stopped it; log: {server.log_file})"
                raise ServerNotReady(server.name, reason, process.tail(server.log_file))
            time.sleep(POLL_SECONDS)
        log.info("server=%s event=ready seconds=%.1f", server.name, time.monotonic() - started)

    def _stop(self, server: Server) -> None:
        record = process.read_pidfile(server.pid_file)
        if record is None:
            return
        process.terminate(record, server.stop_grace)
        server.pid_file.unlink(missing_ok=True)
        self._wait_ports_released(server)
        log.info("server=%s event=stopped pid=%d", server.name, record.pid)

    def _wait_ports_released(self, server: Server) -> None:
        """The kernel may close a dead JVM's sockets a moment after its pid is a zombie (fput
        deferred to a workqueue): seen with Cassandra's listeners, which a start right after a
        kill then found taken. Waits for them, briefly; a port someone else holds stays taken."""
        deadline = time.monotonic() + PORT_RELEASE_SECONDS
        host = self.settings.host
        while time.monotonic() < deadline:
            if all(process.port_free(host, port.number, port.proto) for port in server.ports()):
                return
            time.sleep(0.05)

    def _status(self, server: Server) -> ServerStatus:
        record = process.read_pidfile(server.pid_file)
        alive = record is not None and process.is_alive(record)
        ready = server.probe()
        if alive:
            state = "ready" if ready else "starting"
        else:
            state = "external" if ready else ("dead" if record else "stopped")
        ports = ",".join(f"{port.number}/{port.proto}" for port in server.ports())
        return ServerStatus(server.name, state, record.pid if alive and record else None, ports)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialise `up`/`down` across processes (parallel test runs, a dev shell and CI)."""
        path = self.settings.local_dir / "run" / "stack.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
