"""Elasticsearch 8.x as a single node, from the ``integ-test-zip`` distribution on Maven Central.

That zip is the only Elasticsearch build published to Central (8.x only, no 9.x). It has no
bundled JDK (we run it on the machine's Java 17 through ``ES_JAVA_HOME``) and only the
modules apm, transport-netty4, x-pack-core and x-pack-security: no ingest-geoip (so its
downloader setting does not exist and nothing is ever downloaded), no painless, no
analysis-common. Elasticsearch refuses to run as root, so when we are root it runs as an
unprivileged user (``es_user``) through ``setpriv``, which execs: the pid we record is the
launcher's own, and the server JVM it forks shares its process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from fluxgate_stack import fetch, probes, process, users
from fluxgate_stack.errors import ServerNotReady
from fluxgate_stack.process import PidRecord
from fluxgate_stack.servers.base import JavaServer, Port
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.users import ROOT_TOOLCHAIN, hand_over, run_as

# Yellow is all a single node reaches once an index has replicas; the short server-side
# timeout keeps a probe of a starting node under probes.PROBE_TIMEOUT.
HEALTH_PATH = "/_cluster/health?wait_for_status=yellow&timeout=1s"
THROWAWAY_HEAP = "256m"

# Everything to stdout, which fluxgate-stack appends to the server's log: one file to tail.
LOG4J2_PROPERTIES = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""


class ElasticsearchServer(JavaServer):
    """Elasticsearch, single node, security off, on loopback."""

    name = "elasticsearch"
    ready_timeout = 120.0
    stop_grace = 30.0

    def __init__(
        self,
        settings: StackSettings,
        *,
        extra_settings: Mapping[str, str] | None = None,
        base_dir: Path | None = None,
    ) -> None:
        """``extra_settings`` go into elasticsearch.yml last; ``base_dir`` replaces the run and
        data folders under .local (a throw-away node lives in its own temporary folder)."""
        super().__init__(settings)
        self.extra_settings = dict(extra_settings or {})
        if base_dir is not None:
            self.run_dir = base_dir / "run"
            self.data_dir = base_dir / "data"
            self.log_file = self.run_dir / f"{self.name}.log"
            self.pid_file = self.run_dir / f"{self.name}.pid"
        self.config_dir = self.run_dir / "config"
        self.logs_dir = self.run_dir / "logs"
        self.tmp_dir = self.run_dir / "tmp"

    @property
    def home(self) -> Path:
        return self.dist_dir / f"elasticsearch-{self.settings.es_version}"

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.es_port}"

    def ports(self) -> list[Port]:
        return [Port(self.settings.es_port), Port(self.settings.es_transport_port)]

    def is_installed(self) -> bool:
        return (self.home / "bin" / "elasticsearch").is_file()

    def toolchain(self) -> dict[str, str]:
        tools = super().toolchain()
        if os.geteuid() == 0:
            tools.update(ROOT_TOOLCHAIN)
        return tools

    def unprivileged_user(self) -> str | None:
        return self.settings.es_user if os.geteuid() == 0 else None

    def needs_to_read(self) -> list[Path]:
        return [self.home / "bin" / "elasticsearch", self.home / "lib"]

    def install(self) -> None:
        users.open_to_all(self.dist_dir)
        fetch.install_atomically(self.home, self._fetch_zip)
        users.open_tree(self.home)  # its user runs it, whatever root's umask was

    def _fetch_zip(self, into: Path) -> None:
        coordinate = f"org.elasticsearch.distribution.integ-test-zip:elasticsearch:{self.settings.es_version}:zip"
        archive = fetch.maven_copy_artifact(self.settings.mvn, coordinate, self.build_dir, self.build_dir)
        fetch.unpack_zip(archive, into, strip_top_folder=True)
        archive.unlink()  # ~100 MB, and ~/.m2 keeps a copy anyway

    def config_files(self) -> dict[Path, str]:
        node = node_settings(self.settings, self.data_dir, self.logs_dir) | self.extra_settings
        return {
            self.config_dir / "elasticsearch.yml": elasticsearch_yml(node),
            self.config_dir / "jvm.options": jvm_options(self.settings.es_heap, self.jit_options(), self.java_home()),
            self.config_dir / "log4j2.properties": LOG4J2_PROPERTIES,
        }

    def prepare(self) -> None:
        # config/ too: the keystore is created there on first start
        hand_over([self.data_dir, self.logs_dir, self.tmp_dir, self.config_dir], self.settings.es_user)

    def command(self) -> list[str]:
        launcher = str(self.home / "bin" / "elasticsearch")
        return [*run_as(self.settings.es_user), launcher] if os.geteuid() == 0 else [launcher]

    def process_env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in ("ES_JAVA_OPTS", "JAVA_HOME")}
        env.update(
            ES_JAVA_HOME=str(self.java_home()),
            ES_PATH_CONF=str(self.config_dir),
            ES_TMPDIR=str(self.tmp_dir),  # default: a new /tmp/elasticsearch-* on every start, never removed
            CLI_JAVA_OPTS=" ".join(self.jit_options()),  # the launcher JVM only parses arguments
        )
        return env

    def probe(self) -> bool:
        return probes.http_ok(self.url + HEALTH_PATH)

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_ELASTICSEARCH_URL": self.url}

    def java_home(self) -> Path:
        """The JDK the ``java`` setting belongs to, unless ``es_java_home`` names one."""
        return self.settings.es_java_home or Path(self.java()).resolve().parents[1]


def node_settings(settings: StackSettings, data_dir: Path, logs_dir: Path) -> dict[str, str]:
    """The static settings of a local single node; also what docker-compose.yml must match."""
    return {
        "cluster.name": "fluxgate-local",
        "node.name": "fluxgate-es",
        "discovery.type": "single-node",
        "network.host": settings.host,
        "http.port": str(settings.es_port),
        "transport.port": str(settings.es_transport_port),
        "path.data": str(data_dir),
        "path.logs": str(logs_dir),
        "xpack.security.enabled": "false",
        # A nearly full CI disk would otherwise turn every index read-only mid-test.
        "cluster.routing.allocation.disk.threshold_enabled": "false",
        # Tests clean up with DELETE on index patterns.
        "action.destructive_requires_name": "false",
    }


def elasticsearch_yml(node: Mapping[str, str]) -> str:
    # JSON strings are valid YAML scalars, so no value is ever misread (e.g. "off" as false).
    return "# written by fluxgate-stack before every start\n" + "".join(
        f"{key}: {json.dumps(value)}\n" for key, value in node.items()
    )


def jvm_options(heap: str, jit: list[str], java_home: Path) -> str:
    lines = [
        # Named so that a different JDK changes the fingerprint and restarts the node.
        f"# written by fluxgate-stack; ES_JAVA_HOME={java_home}",
        "-XX:+UseG1GC",
        "-Djava.io.tmpdir=${ES_TMPDIR}",
        "-XX:+ExitOnOutOfMemoryError",
        "-XX:ErrorFile=${ES_TMPDIR}/hs_err_pid%p.log",
        f"-Xms{heap}",
        f"-Xmx{heap}",
        *jit,
    ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def throwaway_node(settings: Mapping[str, str], *, heap: str = THROWAWAY_HEAP, timeout: float = 120.0) -> Iterator[str]:
    """A second, temporary Elasticsearch node with extra static ``settings`` (e.g.
    ``{"thread_pool.write.size": "1", "thread_pool.write.queue_size": "1"}``) on free ports in
    a temporary folder; yields its URL, and stops and deletes it on exit."""
    stack_settings = StackSettings()
    installed = ElasticsearchServer(stack_settings)
    if not installed.is_installed():
        installed.install()
    http_port, transport_port = free_ports(2)
    node_stack = stack_settings.model_copy(
        update={"es_port": http_port, "es_transport_port": transport_port, "es_heap": heap}
    )
    base_dir = Path(tempfile.mkdtemp(prefix="fluxgate-es-"))
    base_dir.chmod(0o755)  # mkdtemp's 0700 would keep the unprivileged user out
    extra = {"cluster.name": f"fluxgate-throwaway-{http_port}", "node.name": "fluxgate-es-throwaway", **settings}
    node = ElasticsearchServer(node_stack, extra_settings=extra, base_dir=base_dir)
    record: PidRecord | None = None
    try:
        node.configure()
        record = process.spawn(node.command(), cwd=node.run_dir, log_file=node.log_file, env=node.process_env())
        wait_ready(node, record, timeout)
        yield node.url
    finally:
        if record is not None:
            process.terminate(record, node.stop_grace)
        shutil.rmtree(base_dir, ignore_errors=True)


def wait_ready(node: ElasticsearchServer, record: PidRecord, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not node.probe():
        if not process.is_alive(record):
            raise ServerNotReady(node.name, "exited during start-up", process.tail(node.log_file))
        if time.monotonic() > deadline:
            raise ServerNotReady(node.name, f"not ready after {timeout:.0f}s", process.tail(node.log_file))
        time.sleep(0.25)


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that are free right now (held together while chosen)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
