"""A Hazelcast 5.x member, single node, on loopback.

``com.hazelcast:hazelcast`` is one jar on Maven Central (5.5+ needs Java 17); it runs as
``HazelcastMemberStarter`` with a generated hazelcast.xml. Data lives in memory only: after
a kill (or any restart) the member comes back empty, as a real one-member cluster would.
Ready when the member's own health endpoint (``/hazelcast/health/ready`` on the member port,
the HEALTH_CHECK REST group) answers 200: the node is ACTIVE and has joined its cluster,
which is what clients need to connect.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from fluxgate_stack import fetch, probes
from fluxgate_stack.errors import InstallError
from fluxgate_stack.servers.base import JavaServer, Port
from fluxgate_stack.settings import StackSettings

HEALTH_PATH = "/hazelcast/health/ready"
# Hazelcast's default ringbuffer keeps 10 000 items; a persister test streams more than that.
RINGBUFFER_CAPACITY = 100_000
# Queues named bounded-* hold 100 items, so a test can fill one; every other queue is
# unbounded (max-size 0, Hazelcast's default), so nothing else blocks by surprise.
BOUNDED_QUEUE_PATTERN = "bounded-*"
BOUNDED_QUEUE_SIZE = 100

# From Hazelcast's "Running in Modular Java" documentation: without them it only warns, but
# then falls back to slower paths (no direct buffer cleaner, no OS metrics).
JAVA17_FLAGS = [
    "--add-modules=java.se",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.management/sun.management=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
]


class HazelcastServer(JavaServer):
    """A single Hazelcast member; in memory only."""

    name = "hazelcast"
    ready_timeout = 60.0
    stop_grace = 15.0

    @property
    def home(self) -> Path:
        return self.dist_dir / f"hazelcast-{self.settings.hazelcast_version}"

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.settings.hazelcast_port}"

    def ports(self) -> list[Port]:
        return [Port(self.settings.hazelcast_port)]

    def is_installed(self) -> bool:
        return self._jar() is not None

    def install(self) -> None:
        fetch.install_atomically(self.home, self._fetch_libs)

    def _fetch_libs(self, into: Path) -> None:
        coordinate = f"com.hazelcast:hazelcast:{self.settings.hazelcast_version}"
        fetch.maven_copy_dependencies(self.settings.mvn, [coordinate], self.build_dir, into / "libs")

    def config_files(self) -> dict[Path, str]:
        return {self.run_dir / "hazelcast.xml": hazelcast_xml(self.settings)}

    def command(self) -> list[str]:
        if self._jar() is None:
            raise InstallError(f"hazelcast: no jar under {self.home}; run `fluxgate-stack install hazelcast`")
        heap = self.settings.hazelcast_heap
        return [
            self.java(),
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+ExitOnOutOfMemoryError",
            *self.jit_options(),
            "-Djava.net.preferIPv4Stack=true",
            *JAVA17_FLAGS,
            f"-Dhazelcast.config={self.run_dir / 'hazelcast.xml'}",
            "-Dhazelcast.phone.home.enabled=false",
            "-cp",
            str(self.home / "libs" / "*"),
            "com.hazelcast.core.server.HazelcastMemberStarter",
        ]

    def probe(self) -> bool:
        return probes.http_ok(f"http://{self.address}{HEALTH_PATH}")

    def env(self) -> dict[str, str]:
        return {
            "FLUXGATE_HAZELCAST_ADDRESS": self.address,
            "FLUXGATE_HAZELCAST_CLUSTER": self.settings.hazelcast_cluster,
        }

    def _jar(self) -> Path | None:
        found = sorted((self.home / "libs").glob("hazelcast-*.jar")) if self.home.is_dir() else []
        return found[0] if found else None


# The open-source member has no authentication or TLS: its REST answers the health check
# only. CLUSTER_READ (on by default) would tell any HTTP client the members and versions.
REST_API = """    <rest-api enabled="true">
      <endpoint-group name="HEALTH_CHECK" enabled="true"/>
      <endpoint-group name="CLUSTER_READ" enabled="false"/>
    </rest-api>"""


def hazelcast_xml(settings: StackSettings) -> str:
    """The member's configuration: one member on loopback, no discovery, fixed port."""
    host, port = settings.host, settings.hazelcast_port
    network = f"""  <network>
    <public-address>{host}:{port}</public-address>
    <port auto-increment="false">{port}</port>
    <join>
      <auto-detection enabled="false"/>
      <multicast enabled="false"/>
      <tcp-ip enabled="true"><member>{host}:{port}</member></tcp-ip>
    </join>
    <interfaces enabled="true"><interface>{host}</interface></interfaces>
{REST_API}
  </network>"""
    return member_xml(settings.hazelcast_cluster, network, {"hazelcast.socket.bind.any": "false"})


def member_xml(cluster: str, network: str, properties: dict[str, str] | None = None) -> str:
    """hazelcast.xml with the data structures every Fluxgate member declares (also what the
    member in docker-compose.yml must declare) around a ``<network>`` element."""
    props = {"hazelcast.phone.home.enabled": "false", **(properties or {})}
    prop_lines = "\n".join(f'    <property name="{escape(k)}">{escape(v)}</property>' for k, v in props.items())
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- written by fluxgate-stack before every start -->
<hazelcast xmlns="http://www.hazelcast.com/schema/config">
  <cluster-name>{escape(cluster)}</cluster-name>
  <properties>
{prop_lines}
  </properties>
{network}
  <ringbuffer name="default">
    <capacity>{RINGBUFFER_CAPACITY}</capacity>
  </ringbuffer>
  <queue name="default">
    <max-size>0</max-size>
  </queue>
  <queue name="{BOUNDED_QUEUE_PATTERN}">
    <max-size>{BOUNDED_QUEUE_SIZE}</max-size>
  </queue>
</hazelcast>
"""
