"""Apache Cassandra 5.0 as a single node: the CQL server standing in for Scylla, which has no
build this machine can install.

``cassandra-all`` and its runtime dependencies come from Maven Central and run as
``CassandraDaemon`` in a JVM of their own, configured the way ``bin/cassandra`` would (the
Java 17 flags of ``conf/jvm17-server.options``, the jamm agent), with a generated
cassandra.yaml. Cassandra runs as root, but then ``mlockall``s its whole address space
(over 1 GB resident at once): when we are root it runs as an unprivileged user instead
(``cassandra_user``, through ``setpriv``), where the 8 MB RLIMIT_MEMLOCK makes the lock
fail harmlessly. No JMX port is opened (nodetool is not needed by the tests).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fluxgate_stack import fetch, probes, users
from fluxgate_stack.errors import InstallError
from fluxgate_stack.servers.base import JavaServer, Port
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.users import ROOT_TOOLCHAIN, hand_over, run_as

CLUSTER_NAME = "fluxgate-local"

# conf/jvm17-server.options of Cassandra 5.0 (its JPMS section): without these it stops at
# once with "Cassandra is unable to access required classes".
JVM17_MODULE_FLAGS = [
    "-Djdk.attach.allowAttachSelf=true",
    *(
        f"--add-exports={export}=ALL-UNNAMED"
        for export in (
            "java.base/jdk.internal.misc",
            "java.management.rmi/com.sun.jmx.remote.internal.rmi",
            "java.rmi/sun.rmi.registry",
            "java.rmi/sun.rmi.server",
            "java.sql/java.sql",
            "java.base/java.lang.ref",
            "jdk.unsupported/sun.misc",
            "jdk.compiler/com.sun.tools.javac.file",
            "jdk.attach/sun.tools.attach",
        )
    ),
    *(
        f"--add-opens={package}=ALL-UNNAMED"
        for package in (
            "java.base/java.lang.module",
            "java.base/jdk.internal.loader",
            "java.base/jdk.internal.ref",
            "java.base/jdk.internal.reflect",
            "java.base/jdk.internal.math",
            "java.base/jdk.internal.module",
            "java.base/jdk.internal.util.jar",
            "jdk.management/com.sun.management.internal",
            "java.base/sun.nio.ch",
            "java.base/java.io",
            "java.base/java.lang.reflect",
            "jdk.compiler/com.sun.tools.javac",
            "java.base/java.lang",
            "java.base/java.util",
        )
    ),
    # The rest of jvm17-server.options that matters on a small heap.
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
]

# Everything to stdout, which fluxgate-stack appends to the server's log: one file to tail.
LOGBACK_XML = """<configuration scan="false">
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.apache.cassandra" level="INFO"/>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


class CassandraServer(JavaServer):
    """Apache Cassandra 5.0, single node, no authentication, on loopback."""

    name = "cassandra"
    ready_timeout = 90.0
    stop_grace = 30.0

    def __init__(self, settings: StackSettings) -> None:
        super().__init__(settings)
        self.triggers_dir = self.run_dir / "triggers"

    @property
    def home(self) -> Path:
        return self.dist_dir / f"cassandra-{self.settings.cassandra_version}"

    @property
    def contact_point(self) -> str:
        return f"{self.settings.host}:{self.settings.cassandra_port}"

    def ports(self) -> list[Port]:
        return [Port(self.settings.cassandra_port), Port(self.settings.cassandra_storage_port)]

    def is_installed(self) -> bool:
        return self._jamm_jar() is not None

    def toolchain(self) -> dict[str, str]:
        tools = super().toolchain()
        if os.geteuid() == 0:
            tools.update(ROOT_TOOLCHAIN)
        return tools

    def unprivileged_user(self) -> str | None:
        return self.settings.cassandra_user if os.geteuid() == 0 else None

    def needs_to_read(self) -> list[Path]:
        return [self.home / "libs", self.run_dir]

    def install(self) -> None:
        users.open_to_all(self.dist_dir)
        fetch.install_atomically(self.home, self._fetch_libs)
        users.open_tree(self.home)  # its user runs it, whatever root's umask was

    def _fetch_libs(self, into: Path) -> None:
        coordinate = f"org.apache.cassandra:cassandra-all:{self.settings.cassandra_version}"
        fetch.maven_copy_dependencies(self.settings.mvn, [coordinate], self.build_dir, into / "libs")

    def config_files(self) -> dict[Path, str]:
        return {
            self.run_dir / "cassandra.yaml": cassandra_yaml(node_config(self.settings, self.data_dir)),
            self.run_dir / "logback.xml": LOGBACK_XML,
        }

    def prepare(self) -> None:
        folders = [self.data_dir / name for name in DATA_FOLDERS]
        hand_over([self.data_dir, *folders, self.triggers_dir], self.settings.cassandra_user)

    def command(self) -> list[str]:
        jamm = self._jamm_jar()
        if jamm is None:
            raise InstallError(f"cassandra: no jamm jar under {self.home}; run `fluxgate-stack install cassandra`")
        java = [
            self.java(),
            *self.heap_options(),
            "-Xss256k",
            "-XX:+UseG1GC",
            "-XX:+ParallelRefProcEnabled",
            "-XX:MaxTenuringThreshold=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:+PerfDisableSharedMem",  # no hsperfdata file written every few ms
            *self.jit_options(),
            "-Djava.net.preferIPv4Stack=true",
            *JVM17_MODULE_FLAGS,
            f"-javaagent:{jamm}",
            *(f"-D{key}={value}" for key, value in system_properties(self.run_dir, self.data_dir).items()),
            "-cp",
            str(self.home / "libs" / "*"),  # expanded by java itself, not by a shell
            "org.apache.cassandra.service.CassandraDaemon",
        ]
        return [*run_as(self.settings.cassandra_user), *java] if os.geteuid() == 0 else java

    def heap_options(self) -> list[str]:
        heap = self.settings.cassandra_heap
        return [f"-Xms{heap}", f"-Xmx{heap}"]

    def probe(self) -> bool:
        return probes.cql_ready(self.settings.host, self.settings.cassandra_port)

    def env(self) -> dict[str, str]:
        return {
            "FLUXGATE_CASSANDRA_HOST": self.settings.host,
            "FLUXGATE_CASSANDRA_PORT": str(self.settings.cassandra_port),
        }

    def _jamm_jar(self) -> Path | None:
        found = sorted((self.home / "libs").glob("jamm-*.jar")) if self.home.is_dir() else []
        return found[0] if found else None


DATA_FOLDERS = ("data", "commitlog", "saved_caches", "hints", "cdc_raw")


def system_properties(run_dir: Path, data_dir: Path) -> dict[str, str]:
    return {
        "cassandra-foreground": "yes",
        "cassandra.config": (run_dir / "cassandra.yaml").as_uri(),
        "logback.configurationFile": str(run_dir / "logback.xml"),
        "cassandra.storagedir": str(data_dir),
        "cassandra.triggers_dir": str(run_dir / "triggers"),  # else a warning on every start
        # A single node has no one to gossip with or wait for.
        "cassandra.skip_wait_for_gossip_to_settle": "0",
        "cassandra.superuser_setup_delay_ms": "0",
        # The clock requests time out by is refreshed every 2 ms by default: the main cost of an
        # idle node (~1 % of a core); 20 ms halves it, and no test times anything that finely.
        "cassandra.approximate_time_precision_ms": "20",
    }


def node_config(settings: StackSettings, data_dir: Path) -> dict[str, object]:
    """cassandra.yaml of the local single node; what 5.0 has no default for, plus what keeps it small."""
    host, storage_port = settings.host, settings.cassandra_storage_port
    return {
        "cluster_name": CLUSTER_NAME,
        "num_tokens": 1,
        "initial_token": "0",  # one token, chosen once: no "picking random token" on first start
        "concurrent_compactors": 1,
        "auto_snapshot": False,  # DROP/TRUNCATE in tests would otherwise fill the disk with snapshots
        "data_file_directories": [str(data_dir / "data")],
        "commitlog_directory": str(data_dir / "commitlog"),
        "saved_caches_directory": str(data_dir / "saved_caches"),
        "hints_directory": str(data_dir / "hints"),
        "cdc_raw_directory": str(data_dir / "cdc_raw"),
        "listen_address": host,
        "rpc_address": host,
        "native_transport_port": settings.cassandra_port,
        "storage_port": storage_port,
        "seed_provider": [
            {
                "class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
                "parameters": [{"seeds": f"{host}:{storage_port}"}],
            }
        ],
        "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",
        "endpoint_snitch": "SimpleSnitch",
        "dynamic_snitch": False,  # re-scores replicas every 100 ms; one node has nothing to score
        "authenticator": "AllowAllAuthenticator",
        "authorizer": "AllowAllAuthorizer",
        # Acknowledged means on disk, as with Elasticsearch's translog: tests SIGKILL the node
        # and expect every acknowledged row back. "periodic" (the default, and Scylla's) acks
        # before the sync, and replay stops at the last sync marker, so a kill loses up to a
        # period of acknowledged writes (seen: a row written 0.1 s before the kill was gone).
        # One fdatasync costs ~0.2 ms here, and concurrent writes share one.
        "commitlog_sync": "batch",
    }


def cassandra_yaml(config: dict[str, object]) -> str:
    # JSON values are valid YAML (flow style), so nothing is ever misread.
    return "# written by fluxgate-stack before every start\n" + "".join(
        f"{key}: {json.dumps(value)}\n" for key, value in config.items()
    )
