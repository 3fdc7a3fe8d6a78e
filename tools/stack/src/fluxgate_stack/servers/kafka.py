"""Apache Kafka 4.x as a single KRaft node (broker and controller in one JVM).

Two client listeners: PLAINTEXT (the lab's: no credentials, no ACLs) and SASL_SSL (SCRAM
over TLS from the stack's CA, every principal held to its ACLs; see
:mod:`fluxgate_stack.security`).
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import uuid
from pathlib import Path

from fluxgate_stack import fetch, probes
from fluxgate_stack.errors import InstallError
from fluxgate_stack.pki import Pki, ensure_pki
from fluxgate_stack.servers.base import JavaServer, Port
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.topics import create_topics

# Since Kafka 4.0 no SLF4J binding is a dependency, so without one the broker logs nothing.
# Kafka 4.x still depends on slf4j-api 1.7, which only binds to log4j-slf4j-impl (the
# slf4j2 module would be ignored); its version follows the log4j-core Kafka 4.4.0 brings.
LOG4J_BINDING = "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5"

LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- stdout is appended to the broker's log file by fluxgate-stack -->
<Configuration status="WARN">
  <Appenders>
    <Console name="stdout" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Root level="INFO"><AppenderRef ref="stdout"/></Root>
  </Loggers>
</Configuration>
"""


class KafkaServer(JavaServer):
    """Apache Kafka, single KRaft node."""

    name = "kafka"
    ready_timeout = 90.0
    stop_grace = 30.0

    @property
    def home(self) -> Path:
        return self.dist_dir / f"kafka-{self.settings.kafka_version}"

    @property
    def bootstrap(self) -> str:
        return f"{self.settings.host}:{self.settings.kafka_port}"

    @property
    def secure_bootstrap(self) -> str:
        return f"{self.settings.host}:{self.settings.kafka_secure_port}"

    @property
    def pki(self) -> Pki:
        return Pki(self.settings.pki_dir)

    def ports(self) -> list[Port]:
        return [
            Port(self.settings.kafka_port),
            Port(self.settings.kafka_controller_port),
            Port(self.settings.kafka_secure_port),
        ]

    def is_installed(self) -> bool:
        return (self.home / "libs").is_dir()

    def install(self) -> None:
        fetch.install_atomically(self.home, self._fetch_libs)

    def _fetch_libs(self, into: Path) -> None:
        coordinates = [f"org.apache.kafka:kafka_2.13:{self.settings.kafka_version}", LOG4J_BINDING]
        fetch.maven_copy_dependencies(self.settings.mvn, coordinates, self.build_dir, into / "libs")
        _check_slf4j_binding(into / "libs")

    def config_files(self) -> dict[Path, str]:
        # Made here, before the fingerprint is taken: a new certificate is a new configuration.
        pki = ensure_pki(self.settings.pki_dir, self.settings.host)
        return {
            self.run_dir / "server.properties": server_properties(self.settings, self.data_dir, pki),
            self.run_dir / "log4j2.xml": LOG4J2_XML,
        }

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.data_dir / "meta.properties").exists():
            self._format_storage()

    def command(self) -> list[str]:
        return [
            *self._java_base(),
            f"-Xmx{self.settings.kafka_heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "kafka.Kafka",
            str(self.run_dir / "server.properties"),
        ]

    def probe(self) -> bool:
        # The plaintext metadata request proves the broker serves; the handshake that the
        # secure listener is up with the stack's certificate.
        host, port = self.settings.host, self.settings.kafka_secure_port
        return probes.kafka_ready(self.bootstrap) and probes.tls_handshake(host, port, self.pki.ca_cert)

    def provision(self) -> None:
        create_topics(self.bootstrap, self.settings.topic_partitions)

    def env(self) -> dict[str, str]:
        return {
            "FLUXGATE_KAFKA_BOOTSTRAP": self.bootstrap,
            "FLUXGATE_KAFKA_SECURE_BOOTSTRAP": self.secure_bootstrap,
            "FLUXGATE_KAFKA_CA_FILE": str(self.pki.ca_cert),
        }

    def _java_base(self) -> list[str]:
        return [
            self.java(),
            "-Xms128m",
            "-XX:+ExitOnOutOfMemoryError",
            *self.jit_options(),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.run_dir / 'log4j2.xml'}",
            "-cp",
            str(self.home / "libs" / "*"),  # expanded by java itself, not by a shell
        ]

    def _format_storage(self) -> None:
        """Write meta.properties once: KRaft refuses to start on an unformatted log dir."""
        command = [
            *self._java_base(),
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            random_cluster_id(),
            "--config",
            str(self.run_dir / "server.properties"),
        ]
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=120, check=False)
        if done.returncode != 0:
            raise InstallError(f"kafka: formatting {self.data_dir} failed, see {self.log_file}")


SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def server_properties(settings: StackSettings, data_dir: Path, pki: Pki | None = None) -> str:
    host, port, controller = settings.host, settings.kafka_port, settings.kafka_controller_port
    secure = settings.kafka_secure_port
    pki = pki or Pki(settings.pki_dir)
    lines = [
        "process.roles=broker,controller",
        "node.id=1",
        # A static quorum: no --standalone/--initial-controllers needed when formatting.
        f"controller.quorum.voters=1@{host}:{controller}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller},SASL_SSL://{host}:{secure}",
        f"advertised.listeners=PLAINTEXT://{host}:{port},SASL_SSL://{host}:{secure}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        *secure_listener_properties(pki),
        f"log.dirs={data_dir}",
        # One node: every internal topic must settle for a single replica.
        "default.replication.factor=1",
        "min.insync.replicas=1",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "num.partitions=3",
        # Tests join consumer groups constantly; the default 3 s delay would slow each one.
        "group.initial.rebalance.delay.ms=0",
        # Our code creates topics explicitly (`up` creates the default ones): a typo must fail.
        "auto.create.topics.enable=false",
        # The log cleaner allocates this at start (128 MiB by default): with a small heap
        # (tests run 256 MiB brokers) that one array could exhaust it. The stack's compacted
        # topics (changelogs, the registry's) are far smaller than 16 MiB of keys per pass.
        "log.cleaner.dedupe.buffer.size=16777216",
    ]
    return "\n".join(lines) + "\n"


def secure_listener_properties(pki: Pki) -> list[str]:
    """The SASL_SSL listener (SCRAM over TLS) and the ACLs every principal on it is held to."""
    lines = [
        # Only for the SASL_SSL listener (listener.name.sasl_ssl.*): PLAINTEXT and CONTROLLER stay as they were.
        f"listener.name.sasl_ssl.sasl.enabled.mechanisms={','.join(SCRAM_MECHANISMS)}",
        # The broker checks SCRAM credentials from the cluster metadata (AlterUserScramCredentials):
        # the login module needs no user of its own, nothing inter-broker goes over SASL.
        *(f"listener.name.sasl_ssl.{m.lower()}.sasl.jaas.config={SCRAM_LOGIN}" for m in SCRAM_MECHANISMS),
        # A PEM key store: the key (PKCS#8, unencrypted) then the chain, in one file; no keytool, no JKS.
        "listener.name.sasl_ssl.ssl.keystore.type=PEM",
        f"listener.name.sasl_ssl.ssl.keystore.location={pki.keystore}",
        "listener.name.sasl_ssl.ssl.client.auth=none",
        # ACLs, kept in the KRaft metadata. Nothing is allowed without one (allow.everyone.if.no.acl.found
        # stays false), except to the super user: ANONYMOUS is whoever connects without authenticating,
        # i.e. every PLAINTEXT client (the lab listener, the registry, the stack's own admin calls) and
        # the broker itself on PLAINTEXT and CONTROLLER, so those go on unaffected while every SASL
        # principal gets only what its ACLs grant.
        f"authorizer.class.name={AUTHORIZER}",
        "super.users=User:ANONYMOUS",
    ]
    if pki.server_cert.is_file():
        # Not read by Kafka: it makes the fingerprint follow the certificate, so a new one
        # (expired, another host) restarts the broker with it.
        digest = hashlib.sha256(pki.server_cert.read_bytes()).hexdigest()[:16]
        lines.append(f"# server certificate sha256 {digest}")
    return lines


def random_cluster_id() -> str:
    """A cluster id in Kafka's Uuid text form (URL-safe base64 of 16 bytes, no padding)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # Kafka rejects ids starting with "-" (they look like CLI options).
        if not text.startswith("-"):
            return text


def _check_slf4j_binding(libs: Path) -> None:
    slf4j = sorted(libs.glob("slf4j-api-*.jar"))
    if slf4j and not slf4j[0].name.startswith("slf4j-api-1."):
        raise InstallError(
            f"kafka: {slf4j[0].name} needs org.apache.logging.log4j:log4j-slf4j2-impl, not {LOG4J_BINDING}; "
            "update LOG4J_BINDING in fluxgate_stack/servers/kafka.py"
        )
