"""`make run`: the local stack, every service and simulated devices, with a live count per topic.

Each component runs as its own process (as it would be deployed), logging to
`.local/run/pipeline/<name>.log`. Ctrl-C (or --duration) stops them upstream first, each
with SIGTERM so it drains what it has in flight: the simulator, the gateways once nothing
more arrives on `sensors.readings`, the aggregator once its group has processed all of it,
each persister once its group has caught up with `temperatures.aggregated`, device-status
last. Nothing a stage produced is then left unprocessed by the next, and the summary shows
the aggregates on the topic beside what each store holds. A service that dies is started
again after a back-off (1 s, doubling to 60 s), its restarts counted on the status line. With --check the exit code says
whether readings, dead letters and aggregates all arrived, every store holds what the topic
holds, every service ran to a clean exit, every metric an alert or a dashboard reads was scraped,
and every dashboard panel's query returns data (the end-to-end test uses that).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from confluent_kafka import Consumer, TopicPartition
from containers import ContainerLauncher
from dashboard_queries import failing_panels, panel_metrics
from pipeline_stores import Stores
from rich.console import Console
from rich.text import Text

from fluxgate_stack import Stack, ensure_up
from fluxgate_stack.servers.prometheus import JOB as PROMETHEUS_JOB
from fluxgate_stack.servers.prometheus import RULES as PROMETHEUS_RULES
from fluxgate_stack.servers.prometheus import remove_targets, rule_metrics, write_targets

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STORE_SERVERS = ["elasticsearch", "cassandra", "hazelcast"]
PERSISTERS = {
    "es-persister": "FLUXGATE_ES_",
    "scylla-persister": "FLUXGATE_SCYLLA_",
    "hazelcast-persister": "FLUXGATE_HZ_",
}
TOPICS = ("sensors.readings", "sensors.deadletter", "temperatures.aggregated", "temperatures.late")
WARN_TOPICS = ("sensors.deadletter", "temperatures.late")  # any arrival there is worth a look
GATEWAYS = ("mqtt-proxy", "coap-ingest")
DRAIN_SECONDS = 90.0  # how long a stage may take to process what the stage before it wrote
RESTART_BACKOFF_MAX_S = 60


@dataclass(frozen=True)
class Names:
    """Topics, groups, MQTT topics and store targets of one pipeline: the services' defaults
    (`make run`), or with a prefix a pipeline of its own beside them (a soak run), sharing
    the servers and nothing else."""

    prefix: str = ""

    def topic(self, default: str) -> str:
        return self.prefix + default

    @property
    def readings(self) -> str:
        return self.topic("sensors.readings")

    @property
    def aggregated(self) -> str:
        return self.topic("temperatures.aggregated")

    def group(self, service: str) -> str:
        return f"{self.prefix}fluxgate-{service}"  # the default of each service's group setting

    def member(self, service: str) -> dict[str, str]:
        """A consumer service's one group member, static (KIP-345): a child killed and started
        again takes its partitions back at once instead of the group waiting out its session."""
        return {"KAFKA__GROUP_INSTANCE_ID": f"{self.group(service)}-0"}

    @property
    def mqtt_root(self) -> str:
        return f"{self.prefix}sensors".replace(".", "-")

    @property
    def store_target(self) -> str:
        """Scylla table and Hazelcast ringbuffer name, and with a prefix the Elasticsearch alias."""
        return f"{self.prefix}temperature_aggregates".replace(".", "_").replace("-", "_")

    @property
    def es_alias(self) -> str:
        return self.store_target if self.prefix else "temperatures"

    @property
    def scylla_table(self) -> str:
        return f"fluxgate.{self.store_target}"

    @property
    def hazelcast_kcql(self) -> str:
        return f"INSERT INTO {self.store_target} SELECT * FROM {self.aggregated} STOREAS RING_BUFFER WITHFORMAT JSON"  # noqa: S608

    def env(self, service: str) -> dict[str, str]:
        """What a service needs to use these names; nothing for the defaults."""
        if not self.prefix:
            return {}
        dead, late = self.topic("sensors.deadletter"), self.topic("temperatures.late")
        sink = {"SINK__GROUP_ID": self.group(service), "SINK__DEADLETTER_TOPIC": self.topic("persisters.deadletter")}
        source = f"SELECT * FROM {self.aggregated}"  # noqa: S608 - KCQL, for our own topic name
        route = {"filter": f"{self.mqtt_root}/+/+", "topic": self.readings, "device_from": "topic:1",
                 "metric_from": "topic:2", "format": "auto"}  # fmt: skip
        return {
            "mqtt-proxy": {"ROUTES": json.dumps([route]), "DEADLETTER_TOPIC": dead,
                           "MQTT__CLIENT_ID": f"{self.prefix}fluxgate-mqtt-proxy"},
            "coap-ingest": {"DEADLETTER_TOPIC": dead},
            "aggregator": {"INPUT_TOPIC": self.readings, "OUTPUT_TOPIC": self.aggregated, "DEADLETTER_TOPIC": dead,
                           "LATE_TOPIC": late, "PROGRESS_GROUP": self.group("aggregator")},
            "es-persister": {**sink, "SINK__KCQL": f"INSERT INTO {self.store_target} {source}"
                             " PK device_id, metric, window_start WITHINDEXSUFFIX=-{YYYY.MM.dd}"},
            "scylla-persister": {**sink, "SINK__KCQL": f"UPSERT INTO {self.scylla_table} {source} AUTOCREATE"},
            "hazelcast-persister": {**sink, "SINK__KCQL": self.hazelcast_kcql},
            "device-status": {"STATUS__APP_ID": self.group("device-status"), "STATUS__INPUT_TOPIC": self.readings,
                              "STATUS__STATUS_TOPIC": self.topic("devices.status")},
        }[service]  # fmt: skip


@dataclass
class Pipeline:
    """The child processes, started in order and stopped in reverse; a stopped or killed
    child can be started again as it was (the soak run's faults)."""

    logs: Path
    children: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    specs: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)
    launcher: ContainerLauncher | None = None  # services from their images instead of the venv
    restarts: dict[str, int] = field(default_factory=dict)  # by revive(), per child
    died_at: dict[str, float] = field(default_factory=dict)  # when revive() first saw a child dead

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.specs[name] = (argv, env or {})
        command, full_env = argv, {**os.environ, **(env or {})}
        if self.launcher is not None and self.launcher.handles(name):
            command, full_env = self.launcher.command(name, argv, env or {})
        log = (self.logs / f"{name}.log").open("ab")
        process = subprocess.Popen(command, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # A restarted child keeps its place: stop_rest() stops in reverse start order.
        names = [child for child, _ in self.children]
        if name in names:
            self.children[names.index(name)] = (name, process)
        else:
            self.children.append((name, process))
        say(f"started {name:<12} pid {process.pid:<7} log {self.logs / (name + '.log')}")

    def restart(self, name: str) -> None:
        self.start(name, *self.specs[name])

    def revive(self, now: float, exempt: Collection[str] = ("simulator",)) -> list[str]:
        """Start again each dead child (but ``exempt``) once its back-off has passed, as
        compose's restart policy and a Kubernetes pod do; the children started."""
        revived = []
        for name in self.dead():
            died = self.died_at.setdefault(name, now)
            if name in exempt or now - died < restart_backoff(self.restarts.get(name, 0)):
                continue
            code = self.process(name).returncode
            self.restarts[name] = self.restarts.get(name, 0) + 1
            del self.died_at[name]
            say(f"{name} exited ({code}); restart {self.restarts[name]}. The end of its log:\n{self.tail(name, 8)}")
            self.restart(name)
            revived.append(name)
        return revived

    def process(self, name: str) -> subprocess.Popen[bytes]:
        return next(process for child, process in self.children if child == name)

    def dead(self) -> list[str]:
        with INTERRUPTS.held():
            return [name for name, process in self.children if process.poll() is not None]

    def tail(self, name: str, lines: int = 25) -> str:
        """The end of a child's log: why it died, shown where the run's output is read."""
        text = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()
        return "\n".join(f"  {name}| {line}" for line in text[-lines:])

    def running(self, name: str) -> bool:
        with INTERRUPTS.held():
            return any(child == name and process.poll() is None for child, process in self.children)

    def stop(self, *names: str) -> dict[str, int]:
        """SIGTERM the named children (each drains); their exit codes."""
        return {name: stop_child(process) for name, process in self.children if name in names}

    def stop_rest(self) -> dict[str, int]:
        return {name: stop_child(process) for name, process in reversed(self.children)}


def restart_backoff(restarts: int) -> float:
    """Seconds a dead child waits before its next start: 1 s, doubling to 60 s at most (a
    pod's CrashLoopBackOff starts at 10 s; a shorter first wait suits a run on one machine)."""
    return float(min(RESTART_BACKOFF_MAX_S, 2**restarts))


def stop_upstream_first(
    pipeline: Pipeline, bootstrap: str, timeout: float = DRAIN_SECONDS, names: Names = Names()
) -> Stopped:
    """Stop each stage only once the next has what it produced (see the module's doc). Writes
    nothing until every child is stopped: stdout may be a pipe whose reader the same Ctrl-C
    just ended, and a second Ctrl-C must not orphan any child."""
    stopped = Stopped()
    with signals_ignored(signal.SIGINT, signal.SIGTERM), Offsets(bootstrap) as offsets:
        stopped.exits |= pipeline.stop("simulator")
        stopped.waits["gateways"] = (
            offsets.settled(names.readings, timeout)
            if any(pipeline.running(name) for name in GATEWAYS)
            else "not running"
        )
        stopped.exits |= pipeline.stop(*GATEWAYS)
        downstream = [("aggregator", names.group("aggregator"), names.readings)] + [
            (name, names.group(name), names.aggregated) for name in PERSISTERS
        ]
        for name, group, topic in downstream:
            if pipeline.running(name):
                stopped.waits[name] = offsets.caught_up(group, topic, timeout)
            stopped.exits |= pipeline.stop(name)
        stopped.exits |= pipeline.stop_rest()
    return stopped


@dataclass
class Stopped:
    """Exit code per child, and how each wait before a stop ended."""

    exits: dict[str, int] = field(default_factory=dict)
    waits: dict[str, str] = field(default_factory=dict)

    def report(self) -> None:
        for name, wait in self.waits.items():
            say(f"drained {name:<19} {wait}")
        for name, code in self.exits.items():
            say(f"stopped {name:<19} exit {code}")


class Offsets:
    """End offsets of the pipeline's topics and committed offsets of its groups."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        # log_level 2: a Kafka that is down (a soak run's fault) is reported by the caller, not per retry.
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fluxgate-run-watch", "log_level": 2})

    def __enter__(self) -> Offsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self._consumer.close()

    def ends(self, topic: str) -> dict[int, int]:
        metadata = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
        partitions = sorted(metadata.partitions) if metadata is not None else []
        return {p: self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in partitions}

    def settled(self, topic: str, timeout: float, quiet: float = 3.0) -> str:
        """Wait until ``topic`` gains nothing for ``quiet`` seconds: the gateways have written
        what the devices sent (an MQTT message still queued in the broker is not yet theirs)."""
        start, last, since = time.monotonic(), self.ends(topic), time.monotonic()
        while time.monotonic() - since < quiet:
            if time.monotonic() - start > timeout:
                return f"still growing after {timeout:.0f} s"
            time.sleep(0.5)
            now = self.ends(topic)
            if now != last:
                last, since = now, time.monotonic()
        took = time.monotonic() - start
        return f"{sum(last.values())} records on {topic}, none new for {quiet:.0f} s (waited {took:.1f} s)"

    def behind(self, group: str, topic: str) -> int:
        """Records of ``topic`` that ``group`` has not committed (a partition it never
        committed counts from its start)."""
        ends = self.ends(topic)
        reader = Consumer({"bootstrap.servers": self._bootstrap, "group.id": group, "enable.auto.commit": False})
        try:  # never subscribes: it only reads the group's committed offsets
            committed = reader.committed([TopicPartition(topic, p) for p in ends], timeout=10)
        finally:
            reader.close()
        done = {tp.partition: max(tp.offset, 0) for tp in committed}
        return sum(max(end - done.get(p, 0), 0) for p, end in ends.items())

    def caught_up(self, group: str, topic: str, timeout: float) -> str:
        start = time.monotonic()
        while (left := self.behind(group, topic)) > 0:
            if time.monotonic() - start > timeout:
                return f"NOT caught up: {left} records of {topic} left after {timeout:.0f} s"
            time.sleep(0.5)
        return f"caught up with {topic} in {time.monotonic() - start:.1f} s"


def stop_child(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM, SIGKILL after 30 s; then whatever the child left in its session (a JVM it forked)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    code = process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the child was its group's leader (own session)
    return code


@contextlib.contextmanager
def signals_ignored(*signums: int) -> Iterator[None]:
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Interrupts:
    """Ctrl-C and SIGTERM as KeyboardInterrupt, raised anywhere but inside :meth:`held`, where
    it waits for the block's end. Raised inside ``Popen.poll``, between taking the child's
    waitpid lock and the ``try`` that gives it back, it leaves the lock taken, and every later
    ``wait`` of that child blocks for ever (a landing run's stop hung so, right after it had
    stopped mqtt-proxy). The watch loop polls every child right after each status line, when a
    Ctrl-C is likeliest. Held here, not by masking the signal: another thread (librdkafka's)
    would take it, and Python would still run the handler in the main thread mid-poll."""

    def __init__(self) -> None:
        self.holding = 0
        self.pending = False

    def handler(self, signum: int, frame: object) -> None:
        if self.holding:
            self.pending = True
            return
        raise KeyboardInterrupt  # SIGTERM stops the pipeline the way Ctrl-C does

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
        if not self.holding and self.pending:
            self.pending = False
            raise KeyboardInterrupt


INTERRUPTS = Interrupts()


def take_interrupts() -> None:
    """Ctrl-C and SIGTERM through :data:`INTERRUPTS`, for a run that watches a :class:`Pipeline`
    (make run, the soak, the fleet bench): its polls of a child are then never cut in two. Also
    when started with SIGINT ignored (a shell's background job, `&` without job control), which
    Python would leave ignored, and the run would go on for ever."""
    signal.signal(signal.SIGTERM, INTERRUPTS.handler)
    signal.signal(signal.SIGINT, INTERRUPTS.handler)


def say(text: str) -> None:
    """Print a line; once stdout is gone (`make run | tee` after Ctrl-C), to stderr instead: the
    run goes on, and above all its shutdown does, and how it stopped is still told somewhere."""
    global _STDOUT_GONE
    if not _STDOUT_GONE:
        try:
            print(text, flush=True)
            return
        except BrokenPipeError:
            _STDOUT_GONE = True
            # Point the descriptor at /dev/null, so the interpreter's own flush at exit cannot fail too.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr, flush=True)


_STDOUT_GONE = False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mqtt-devices", type=int, default=20)
    parser.add_argument("--coap-devices", type=int, default=5)
    parser.add_argument("--rate", type=float, default=1.0, help="readings per device per second per metric")
    parser.add_argument("--coap-port", type=int, default=5683)
    parser.add_argument("--malformed", type=float, default=0.01, help="fraction of broken payloads")
    parser.add_argument("--late", type=float, default=0.01, help="fraction of late readings")
    parser.add_argument("--late-by", type=float, default=300.0, help="how many seconds behind a late reading is")
    parser.add_argument("--window", default="1 minute", help="aggregation window")
    parser.add_argument("--watermark", default="30 seconds", help="how late a reading may be and still count")
    parser.add_argument("--no-aggregator", action="store_true", help="skip the Spark job (and the persisters)")
    parser.add_argument("--no-persisters", action="store_true", help="skip the persisters")
    parser.add_argument("--status-port", type=int, default=9107, help="device-status's HTTP port (GET /devices)")
    parser.add_argument("--console-port", type=int, default=9108, help="the console's page (0: no console)")
    parser.add_argument(
        "--secured",
        action="store_true",
        help="every service on Kafka's SASL_SSL listener as its own principal, allowed only what it needs (ACLs), "
        "the persisters and the console on the stack's secured Elasticsearch and Cassandra (TLS, own users), "
        "every service through the registry's HTTPS door as its own Keycloak client, the MQTT devices and "
        "mqtt-proxy on Mosquitto's TLS listener with client certificates and passwords, and the CoAP devices "
        "serving coap-ingest over DTLS with a pre-shared key made for the run",
    )
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--check", action="store_true", help="exit 1 unless readings (and aggregates) arrived")
    parser.add_argument(
        "--until-checked",
        type=int,
        default=None,
        metavar="READINGS",
        help="stop once this many readings, dead letters, aggregates and new documents in every store "
        "arrived (at most --duration): the end-to-end test waits for what it checks, not a fixed time",
    )
    parser.add_argument(
        "--until-released",
        type=Path,
        default=None,
        metavar="PATH",
        help="with --until-checked: go on until PATH exists too (the end-to-end test's browser is done with the page)",
    )
    return parser.parse_args(argv)


def start_all(
    pipeline: Pipeline,
    args: argparse.Namespace,
    names: Names = Names(),
    simulator: tuple[str, ...] = (),
    ports: dict[str, int] | None = None,
    devices_when: Callable[[], None] | None = None,
    devices: bool = True,
    kafka: Callable[[str], dict[str, str]] | None = None,
) -> None:
    """Every child, in order; ``simulator`` adds options of its own, ``ports`` gives
    services HTTP ports other than their defaults. With ``devices_when`` the simulated
    devices start last, once it returns (a soak run accounts for every reading sent);
    without ``devices`` not at all (a benchmark starts them step by step). ``kafka`` gives a
    service's own Kafka settings (``--secured``: its principal on the SASL_SSL listener)."""
    coap_resources = coap_resources_of(args, names)
    common = {"LOG__JSON_OUTPUT": "false"}
    http = {name: {"HTTP__PORT": str(port)} for name, port in (ports or {}).items()}
    http["device-status"] = {"HTTP__PORT": str(args.status_port)}

    def service(name: str, prefix: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        values = {**common, **names.env(name), **http.get(name, {}), **(env or {}), **(kafka(name) if kafka else {})}
        pipeline.start(name, argv, prefixed(prefix, values))

    fleet = devices_argv(args, names, simulator)
    if devices and devices_when is None:
        pipeline.start("simulator", fleet)
    service("mqtt-proxy", "FLUXGATE_MQTT_", [str(BIN / "fluxgate-mqtt-proxy")])
    service("device-status", "FLUXGATE_STATUS_", [str(BIN / "fluxgate-device-status")], names.member("device-status"))
    service("coap-ingest", "FLUXGATE_COAP_", [str(BIN / "fluxgate-coap-ingest")], {"RESOURCES": coap_resources})
    if not args.no_aggregator:
        checkpoints = getattr(args, "checkpoints", None) or ROOT / ".local/run/pipeline/checkpoints"
        window = {"WINDOW__SIZE": args.window, "WINDOW__WATERMARK": args.watermark, "CHECKPOINT_DIR": str(checkpoints)}
        if getattr(args, "spark_master", None):  # a cluster's driver, in client mode (the aggregator README)
            window |= {"SPARK__MASTER": args.spark_master, "SPARK__CONF": json.dumps(args.spark_conf)}
        service("aggregator", "FLUXGATE_AGG_", [str(BIN / "fluxgate-aggregator"), "run"], window)
    if persisting(args):
        for name, prefix in PERSISTERS.items():
            service(name, prefix, [str(BIN / f"fluxgate-{name}")], names.member(name))
    if devices and devices_when is not None:
        devices_when()
        pipeline.start("simulator", fleet)


def device_prefix(names: Names) -> tuple[str, ...]:
    return ("--device-prefix", names.prefix.replace(".", "-")) if names.prefix else ()


def coap_resources_of(args: argparse.Namespace, names: Names) -> str:
    """FLUXGATE_COAP_RESOURCES for the simulated CoAP devices (JSON; coaps:// when ``--secured``)."""
    coaps = ("--coaps",) if getattr(args, "secured", False) else ()
    return subprocess.run(
        [str(BIN / "fluxgate-sim"), "coap-resources", "--coap-devices", str(args.coap_devices),
         "--coap-port", str(args.coap_port), "--topic", names.readings, *device_prefix(names), *coaps],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def devices_argv(args: argparse.Namespace, names: Names, simulator: tuple[str, ...] = ()) -> list[str]:
    """The simulator's command line: the devices ``args`` asks for, under ``names``."""
    return [str(BIN / "fluxgate-sim"), "run", "--mqtt-devices", str(args.mqtt_devices),
            "--coap-devices", str(args.coap_devices), "--coap-port", str(args.coap_port), "--rate", str(args.rate),
            "--malformed", str(args.malformed), "--late", str(args.late), "--late-by-s", str(args.late_by),
            "--out-of-order", "0.05", "--duplicates", "0.01", "--seed", str(getattr(args, "seed", 7)),
            "--mqtt-root", names.mqtt_root, *device_prefix(names), *simulator]  # fmt: skip


def start_console(
    pipeline: Pipeline,
    port: int,
    names: Names = Names(),
    stores: bool = True,
    kafka: dict[str, str] | None = None,
    health_port: int | None = None,
) -> None:
    """The console on the local services' default ports, auth off (this machine only: loopback),
    asking the stores the persisters write under ``names`` (none without persisters). Its
    health, metrics and readiness on ``health_port``, by default the port after ``port`` (a run
    on free ports passes a free one: the next port was never checked)."""
    if not port:
        return
    health = port + 1 if health_port is None else health_port
    env = {"WEB__HOST": "127.0.0.1", "WEB__PORT": str(port), "HTTP__HOST": "127.0.0.1", "HTTP__PORT": str(health),
           "PAGE_AUTH__MODE": "none", "REPLAY_AUTH__MODE": "none", "LOG__JSON_OUTPUT": "false",
           **console_stores(names, stores), **(kafka or {})}  # fmt: skip
    pipeline.start("console", [str(BIN / "fluxgate-console")], prefixed("FLUXGATE_CONSOLE_", env))
    say(f"console: http://127.0.0.1:{port}/  (Kafka Connect API: http://127.0.0.1:{port}/connect/connectors)")


def console_stores(names: Names, shown: bool) -> dict[str, str]:
    """The console's store settings: the persisters' targets under ``names``, on the local stack."""
    if not shown:
        return {"ELASTICSEARCH__HOSTS": "[]", "SCYLLA__CONTACT_POINTS": "[]", "HAZELCAST__MEMBERS": "[]"}
    return {"ELASTICSEARCH__ALIAS": names.es_alias, "SCYLLA__TABLE": names.scylla_table,
            "HAZELCAST__KCQL": names.hazelcast_kcql}  # fmt: skip


# Topics and groups SERVICE_GRANTS names, by the default each service's settings give them.
GRANTED_TOPICS = ("sensors.readings", "sensors.deadletter", "temperatures.aggregated", "temperatures.late",
                  "devices.status", "persisters.deadletter")  # fmt: skip
SECURED_SERVICES = ("mqtt-proxy", "coap-ingest", "aggregator", "device-status", *PERSISTERS, "console")


def secured_kafka(names: Names, folder: Path) -> Callable[[str], dict[str, str]]:
    """``--secured``: each service its own SCRAM principal on the stack's SASL_SSL listener,
    allowed only what it needs (``fluxgate_stack.SERVICE_GRANTS``, on ``names``' topics and
    groups), its password in a 0600 file under ``folder`` (what a mounted Secret gives a pod)."""
    from fluxgate_stack import SERVICE_GRANTS, add_principal, endpoints, new_credentials, renamed

    stack = endpoints()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    renames = {topic: names.topic(topic) for topic in GRANTED_TOPICS}
    renames |= {f"fluxgate-{service}": names.group(service) for service in SECURED_SERVICES}
    renames["fluxgate-device-status-"] = names.group("device-status") + "-"  # faust's own topics
    settings: dict[str, dict[str, str]] = {}
    for service in SECURED_SERVICES:
        grants = SERVICE_GRANTS[service] + (SERVICE_GRANTS["console-replay"] if service == "console" else ())
        principal = new_credentials(f"{names.prefix}fluxgate-{service}", folder)  # a new password each run
        add_principal(principal.username, principal.password, renamed(grants, renames))
        settings[service] = principal.kafka_env("")
    say(f"secured: every service logs in to {stack.secure_bootstrap} (SASL_SSL, SCRAM) as its own principal")
    return lambda service: settings.get(service, {})


SECURED_SERVERS = ["elasticsearch-secured", "cassandra-secured", "registry-secured"]


def secured_devices(folder: Path) -> tuple[str, ...]:
    """``--secured``: the simulated MQTT devices on Mosquitto's TLS listener, with their
    client certificate and password; the CoAP devices serving DTLS with the pre-shared key
    :func:`secured_coap` wrote for this run."""
    from fluxgate_stack.secured_mqtt import device_args

    coap = ("--coap-psk-identity", COAP_PSK_IDENTITY, "--coap-psk-file", str(folder / COAP_PSK_FILE))
    return (*device_args(folder), *coap)


COAP_PSK_IDENTITY, COAP_PSK_FILE = "fluxgate-coap-ingest", "coap-devices.psk"


def secured_coap(folder: Path) -> dict[str, str]:
    """``--secured``: coap-ingest's DTLS settings for the CoAP devices: a new pre-shared key
    each run, in the 0600 file both the devices and coap-ingest read (never in a variable)."""
    from fluxgate_stack.private_files import write_private

    key = secrets.token_urlsafe(13)  # 18 characters, the longest PSK tinydtls (both ends) takes
    write_private(folder / COAP_PSK_FILE, key)
    say("secured: the CoAP devices serve coap-ingest over DTLS with a pre-shared key made for this run")
    return {"DTLS__PSK_IDENTITY": COAP_PSK_IDENTITY, "DTLS__PSK_KEY_FILE": str(folder / COAP_PSK_FILE)}


def secured_stores(folder: Path) -> dict[str, dict[str, str]]:
    """``--secured``: the persisters and the console on the stack's secured Elasticsearch and
    Cassandra (TLS from the stack's CA), each as its own user held to its role, the passwords
    in 0600 files (what a mounted Secret gives a pod)."""
    from fluxgate_stack.secured_cassandra import cassandra_env
    from fluxgate_stack.secured_elasticsearch import elasticsearch_env

    def cassandra(role: str) -> dict[str, str]:
        return dict(cassandra_env("", role, password_file=folder / f"cassandra-{role}.password"))

    say("secured: the persisters and the console reach Elasticsearch and Cassandra over TLS, each as its own user")
    return {
        "es-persister": elasticsearch_env("", "ELASTICSEARCH", "es-persister"),
        "scylla-persister": cassandra("scylla-persister"),
        "console": {**elasticsearch_env("", "ELASTICSEARCH", "console"), **cassandra("console")},
    }


def secured_registry(folder: Path) -> dict[str, dict[str, str]]:
    """``--secured``: every service through the registry's HTTPS door (the same registry),
    as its own Keycloak client held to its role (the persisters only read), the client's
    ``id:secret`` in a 0600 file."""
    from fluxgate_stack.private_files import write_private
    from fluxgate_stack.secured_registry import registry_env

    settings: dict[str, dict[str, str]] = {}
    for service in SECURED_SERVICES:
        env = registry_env("", service)
        user_info = folder / f"registry-{service}.userinfo"
        write_private(user_info, env.pop("REGISTRY__BASIC_AUTH_USER_INFO"))
        settings[service] = {**env, "REGISTRY__BASIC_AUTH_USER_INFO_FILE": str(user_info)}
    say("secured: every service reaches the registry over HTTPS as its own Keycloak client")
    return settings


def secured(names: Names, folder: Path) -> Callable[[str], dict[str, str]]:
    """``--secured``: each service's settings for every secured hop of the stack."""
    from fluxgate_stack.secured_mqtt import mqtt_proxy_env

    kafka, stores, registry = secured_kafka(names, folder), secured_stores(folder), secured_registry(folder)
    stores["mqtt-proxy"] = mqtt_proxy_env()
    say("secured: the devices and mqtt-proxy reach Mosquitto over TLS, each with a client certificate and a password")
    stores["coap-ingest"] = secured_coap(folder)
    return lambda service: {**kafka(service), **stores.get(service, {}), **registry[service]}


def persisting(args: argparse.Namespace) -> bool:
    return not (args.no_aggregator or args.no_persisters)


def prefixed(prefix: str, values: dict[str, str]) -> dict[str, str]:
    return {prefix + key: value for key, value in values.items()}


def end_offsets(consumer: Consumer) -> dict[str, int]:
    """Records per topic: the sum of the partitions' high watermarks (what Kafka holds)."""
    totals: dict[str, int] = {}
    metadata = consumer.list_topics(timeout=10).topics
    for topic in TOPICS:
        partitions = metadata[topic].partitions if topic in metadata else {}
        totals[topic] = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in partitions)
    return totals


Done = Callable[[dict[str, int], dict[str, int]], bool]


def device_states(port: int) -> dict[str, int]:
    """Devices per status as device-status answers ``GET /devices`` (empty until it answers)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/devices", timeout=2) as reply:
            listed = json.load(reply)
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return {}
    states: dict[str, int] = {}
    for device in listed["devices"]:
        states[device["status"]] = states.get(device["status"], 0) + 1
    return states


def status_line(
    elapsed: float,
    arrived: dict[str, int],
    rates: dict[str, float],
    counts: dict[str, int],
    devices: dict[str, int],
    dead: list[str],
    restarts: dict[str, int] | None = None,
) -> str:
    """The 5-second line, the no-browser view: rendered by rich, in colour on a terminal (dead
    letters and late readings amber when there are any, a dead service red) and plain text
    when stdout is a pipe or a file, so `make run | tee` logs stay greppable."""
    line = Text()
    line.append(f"[{elapsed:6.0f}s]", style="dim")
    for i, topic in enumerate(TOPICS):
        warn = arrived[topic] > 0 and topic in WARN_TOPICS
        line.append(f"{'  ' if i else ' '}{topic} ", style="bold")
        line.append(f"+{arrived[topic]}", style="yellow" if warn else "green")
        line.append(f" ({rates[topic]:.0f}/s)", style="dim")
    for store, count in counts.items():
        line.append(f"  {store}: ", style="bold")
        line.append(str(count), style="cyan")
    for state, n in sorted(devices.items()):
        line.append(f"  devices {state}: ", style="bold")
        line.append(str(n), style="green" if state == "ONLINE" else "yellow")
    if dead:
        line.append(f"  DOWN: {','.join(dead)}", style="bold red")
    if restarts:
        counted = ",".join(f"{name}×{count}" for name, count in sorted(restarts.items()))
        line.append(f"  restarted: {counted}", style="yellow")
    terminal = Console(highlight=False, soft_wrap=True)
    with terminal.capture() as captured:
        terminal.print(line)
    return captured.get().rstrip("\n")


def watch(
    pipeline: Pipeline,
    bootstrap: str,
    duration: float | None,
    stores: Stores | None,
    done: Done | None = None,
    status_port: int = 9107,
) -> None:
    """Show what arrives every few seconds until ``duration`` or Ctrl-C, or until ``done``
    (readings arrived per topic, store counts) says the run has shown what it had to."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fluxgate-run-watch"})
    start, first = time.monotonic(), end_offsets(consumer)
    previous, last = first, time.monotonic()
    try:
        while duration is None or time.monotonic() - start < duration:
            time.sleep(5 if done is None else 1)
            now, current = time.monotonic(), end_offsets(consumer)
            rates = {t: (current[t] - previous[t]) / (now - last) for t in TOPICS}
            counts = stores.counts() if stores else {}
            arrived = {t: current[t] - first[t] for t in TOPICS}
            dead = pipeline.dead()
            say(status_line(now - start, arrived, rates, counts, device_states(status_port), dead, pipeline.restarts))
            previous, last = current, now
            if done is not None and (dead or done({t: current[t] - first[t] for t in TOPICS}, counts)):
                break  # a checked run reports a death instead of hiding it behind a restart
            pipeline.revive(now)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def checked(args: argparse.Namespace, held_before: dict[str, int]) -> Done | None:
    """With ``--until-checked N``: N readings, some dead letters and aggregates, new documents in every store."""
    if args.until_checked is None:
        return None
    wanted = ["sensors.deadletter"] + ([] if args.no_aggregator else ["temperatures.aggregated"])

    def done(arrived: dict[str, int], counts: dict[str, int]) -> bool:
        enough = arrived["sensors.readings"] >= args.until_checked and all(arrived[t] > 0 for t in wanted)
        released = args.until_released is None or args.until_released.exists()
        return enough and released and all(count > held_before[store] for store, count in counts.items())

    return done


def main() -> int:
    args = parse_args()
    servers = ["kafka", "registry", "mosquitto", "prometheus"] + (STORE_SERVERS if persisting(args) else [])
    servers += SECURED_SERVERS if args.secured else []
    endpoints = ensure_up(servers)
    stores = Stores(endpoints, secured=args.secured) if persisting(args) else None
    held_before = stores.counts() if stores else {}  # a store keeps what earlier runs wrote
    logs = ROOT / ".local/run/pipeline"
    logs.mkdir(parents=True, exist_ok=True)
    pipeline = Pipeline(logs)
    take_interrupts()
    # `kill -USR1` prints where every thread is to stderr: a stop that hangs can be asked why.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    counter = Consumer({"bootstrap.servers": endpoints.bootstrap, "group.id": "fluxgate-run-watch"})
    before = end_offsets(counter)
    devices: dict[str, int] = {}
    died: list[str] = []
    try:
        kafka = secured(Names(), logs / "secrets") if args.secured else None
        start_all(pipeline, args, simulator=secured_devices(logs / "secrets") if args.secured else (), kafka=kafka)
        start_console(pipeline, args.console_port, stores=persisting(args), kafka=kafka("console") if kafka else None)
        scrape(args)
        say("watching Kafka (Ctrl-C stops everything)...")
        watch(pipeline, endpoints.bootstrap, args.duration, stores, checked(args, held_before), args.status_port)
        died = pipeline.dead()
        devices = device_states(args.status_port)
        unscraped = unscraped_metrics() if args.check else {}
        # The dashboards show the whole pipeline: asked only when all of it runs.
        unqueryable = failing_panels(endpoints.prometheus_url) if args.check and persisting(args) else []
    finally:
        remove_targets(SCRAPE_RUN)  # its services stop now: not "down" to Prometheus
        stopped = stop_upstream_first(pipeline, endpoints.bootstrap)
    stopped.report()
    for name in sorted({*died, *(n for n, code in stopped.exits.items() if code)}):
        say(f"{name} failed; the end of its log:\n{pipeline.tail(name)}")
    arrived = {topic: count - before[topic] for topic, count in end_offsets(counter).items()}
    counter.close()
    documents = stored(stores, held_before, arrived["temperatures.aggregated"]) if stores else {}
    summary = {"arrived": arrived, "documents": documents, "devices": devices, "died": died,
               "restarts": pipeline.restarts}  # fmt: skip
    say(json.dumps({**summary, "drained": stopped.waits, "exits": stopped.exits}))
    wanted = ["sensors.readings", "sensors.deadletter"] + ([] if args.no_aggregator else ["temperatures.aggregated"])
    healthy = not died and not any(stopped.exits.values()) and all(arrived.get(t, 0) > 0 for t in wanted)
    for alert, metrics in unscraped.items():
        say(f"{alert} reads {', '.join(sorted(metrics))}, which no service of this run exported")
    for panel in unqueryable:
        say(panel)
    healthy = healthy and not unscraped and not unqueryable
    agree = all(count == arrived["temperatures.aggregated"] for count in documents.values())
    healthy = healthy and agree and all(count > 0 for count in documents.values()) and devices.get("ONLINE", 0) > 0
    return 1 if args.check and not healthy else 0


SCRAPE_RUN = "make-run"  # its targets file in the stack's Prometheus


def scrape(args: argparse.Namespace) -> None:
    """Have the stack's Prometheus scrape every service of the run, labelled as the alerts expect."""
    from fluxgate_console.settings import local_services

    targets = {service.name: service.urls[0].removeprefix("http://") for service in local_services()}
    targets["device-status"] = f"127.0.0.1:{args.status_port}"
    if args.console_port:
        targets["console"] = f"127.0.0.1:{args.console_port + 1}"
    if args.no_aggregator:
        del targets["aggregator"]
    if not persisting(args):
        for name in PERSISTERS:
            del targets[name]
    write_targets(SCRAPE_RUN, targets)
    say(f"prometheus: {Stack().endpoints().prometheus_url}/alerts  (Fluxgate's alerts, on every service of the run)")


def unscraped_metrics() -> dict[str, set[str]]:
    """Each alert and dashboard panel with the metrics it reads that no service of the run has
    exported to the stack's Prometheus (as a sample or only as a family, e.g. a counter nothing
    counted yet)."""
    reply = httpx.get(
        f"{Stack().endpoints().prometheus_url}/api/v1/targets/metadata",
        params={"match_target": f'{{job="{PROMETHEUS_JOB}"}}'},
        timeout=10,
    )
    reply.raise_for_status()
    exported = {entry["metric"] for entry in reply.json()["data"]}
    exported |= {f"{name}_total" for name in exported}  # a counter's family is named without it
    wanted = {f"alert {alert}": metrics for alert, metrics in rule_metrics(ROOT / PROMETHEUS_RULES).items()}
    wanted |= panel_metrics()
    return {alert: missing for alert, metrics in wanted.items() if (missing := metrics - exported - {"up"})}


def stored(stores: Stores, held_before: dict[str, int], aggregates: int, timeout: float = 15.0) -> dict[str, int]:
    """What each store gained in this run, once every store shows ``aggregates`` (the topic's
    count) or ``timeout`` passed: a store may show a write a moment after it acknowledged it
    (Elasticsearch refreshes once a second)."""
    deadline = time.monotonic() + timeout
    while True:
        gained = {store: count - held_before[store] for store, count in stores.counts().items()}
        if all(count == aggregates for count in gained.values()) or time.monotonic() > deadline:
            stores.close()
            say(f"aggregates on temperatures.aggregated: {aggregates}; in each store: {gained}")
            return gained
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
