"""MQTT-to-Kafka throughput of mqtt-proxy next to Mosquitto's own delivery, measured in one run.

Every leg gets the same JSON readings, published with ``mosquitto_pub -l`` at the leg's QoS
(0, 1 and 2 by default):

* baseline: Mosquitto delivers them to ``mosquitto_sub`` (a C client that only prints them);
* gmqtt floor: a plain gmqtt client (``_gmqtt_floor.py``) receives and acknowledges them,
  nothing else: what any gmqtt-based proxy pays before converting anything;
* proxy: the real ``fluxgate-mqtt-proxy`` process turns them into Avro SensorReadings in a
  fresh Kafka topic, and a consumer here counts the records (no decoding while timed);
* 2 proxies: two of them on one shared subscription (``$share/<group>/...``), same topic.

Each leg is timed from the first publish to the last message received, and the CPU of the
subscriber (``mosquitto_sub``, the gmqtt client or the proxies) is read from the kernel.
Results: ``bench-results/mqtt_proxy.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import RESULTS, LegResult, Meter, micros_per, print_table, reap, server_pid, stack_up, write_report
from _mqtt import ProxyProcess, Publisher, mqtt_client
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from fluxgate_testing import free_port, unique_topic

from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroDecoder
from fluxgate_stack import Endpoints, StackSettings

DEVICES = 1000
WARM_UP = 2000
PARTITIONS = 3
FIRST_TIMESTAMP_MS = 1_486_997_194_029  # the reading format of the original issue
RECEIVE_MAXIMUM = 1000  # the proxy's default, given to the gmqtt floor too
IDLE_S = 3.0  # QoS 0 may lose messages: a leg ends after this long without one
BASELINE, FLOOR, PROXY, TWO_PROXIES = "mosquitto_sub", "gmqtt floor", "mqtt-proxy", "2 mqtt-proxies"


@dataclass(frozen=True)
class Leg:
    """What one leg measured."""

    name: str
    qos: int
    messages: int
    seconds: float
    subscriber_cpu: float
    broker_cpu: float
    publisher_cpu: float
    kafka_cpu: float = 0.0

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    def result(self) -> LegResult:
        extra = {
            "messages": self.messages,
            "seconds": round(self.seconds, 3),
            "mosquitto_us": micros_per(self.broker_cpu, self.messages),
            "kafka_us": micros_per(self.kafka_cpu, self.messages),
            "publisher_us": micros_per(self.publisher_cpu, self.messages),
        }
        cpu = micros_per(self.subscriber_cpu, self.messages)
        return LegResult(f"QoS {self.qos}", self.name, self.per_second, cpu, extra)


def main() -> int:
    args = parse_args()
    queue_limit = StackSettings().mqtt_max_queued_messages
    if queue_limit and args.messages > queue_limit:
        print(f"warning: more messages than Mosquitto queues per session ({queue_limit}): a slow proxy may lose some")
    endpoints = stack_up()
    legs: list[Leg] = []
    with tempfile.TemporaryDirectory(prefix="fluxgate-bench-") as tmp:
        work = Path(tmp)
        payloads = write_payloads(work / "readings.jsonl", args.messages, offset=WARM_UP)
        warm_up = write_payloads(work / "warm-up.jsonl", WARM_UP, offset=0)
        for qos in args.qos:
            legs.append(run_baseline(endpoints, payloads, qos, args))
            legs.append(run_floor(endpoints, payloads, qos, args))
            for count in range(1, args.proxies + 1):
                legs.append(run_proxies(endpoints, payloads, warm_up, qos, count, args))
            print_legs([leg for leg in legs if leg.qos == qos], qos, args)
    report(legs, args)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000, help="readings per leg (default: 100000)")
    parser.add_argument("--qos", type=int, nargs="+", choices=(0, 1, 2), default=[0, 1, 2], help="QoS levels to run")
    parser.add_argument("--proxies", type=int, choices=(1, 2), default=2, help="2: also two on a shared subscription")
    parser.add_argument("--inflight", type=int, default=100, help="mosquitto_pub's unacknowledged messages")
    parser.add_argument("--timeout", type=float, default=240.0, help="give up a leg after this many seconds")
    parser.add_argument(
        "--proxy-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a proxy setting without its FLUXGATE_MQTT_ prefix, e.g. KAFKA__LINGER_MS=2 (repeatable)",
    )
    return parser.parse_args()


def write_payloads(path: Path, count: int, offset: int) -> Path:
    """One JSON reading per line, as devices of the original issue send them."""
    with path.open("w") as out:
        for i in range(offset, offset + count):
            reading = {
                "sensorId": f"Sensor{i % DEVICES}",
                "timestamp": FIRST_TIMESTAMP_MS + i,
                "temperature": round(15 + (i % 200) / 10, 1),
            }
            out.write(json.dumps(reading, separators=(",", ":")) + "\n")
    return path


# --- baseline: Mosquitto to mosquitto_sub ---------------------------------------------------


def run_baseline(endpoints: Endpoints, payloads: Path, qos: int, args: argparse.Namespace) -> Leg:
    topic, client_id = f"bench/{uuid.uuid4().hex[:8]}/baseline", f"bench-sub-{uuid.uuid4().hex[:8]}"
    session = ("-t", topic, "-q", str(qos), "-i", client_id)
    # A persistent session subscribed before anything is published: messages sent while the
    # measured subscriber is still connecting are queued for it rather than lost.
    subprocess.run(mqtt_client(endpoints, "mosquitto_sub", *session, "-c", "-E"), check=True, timeout=30)
    try:
        count = ("-C", str(args.messages))
        subscriber = subprocess.Popen(
            mqtt_client(endpoints, "mosquitto_sub", *session, "-c", *count), stdout=subprocess.DEVNULL
        )
        wall, subscriber_cpu, broker_cpu, publisher_cpu = publish_to(subscriber, endpoints, topic, payloads, qos, args)
    finally:
        # A clean-session connect discards the persistent session on the shared broker.
        subprocess.run(mqtt_client(endpoints, "mosquitto_sub", *session, "-E"), check=False, timeout=30)
    return Leg(BASELINE, qos, args.messages, wall, subscriber_cpu, broker_cpu, publisher_cpu)


def publish_to(
    subscriber: subprocess.Popen[Any],
    endpoints: Endpoints,
    topic: str,
    payloads: Path,
    qos: int,
    args: argparse.Namespace,
) -> tuple[float, float, float, float]:
    """Publish ``payloads`` to a subscribed child until it exits: wall seconds, and the CPU
    seconds of the subscriber, Mosquitto and the publisher."""
    meter = Meter({"mosquitto": server_pid("mosquitto")}).start()
    publisher = Publisher(endpoints, topic, payloads, qos, args.inflight)
    try:
        subscriber_cpu = reap(subscriber, args.timeout)
        meter.stop()
    finally:
        publisher_cpu = publisher.close()
    assert meter.cpu is not None
    return meter.wall, subscriber_cpu, meter.cpu["mosquitto"], publisher_cpu


# --- gmqtt floor: Mosquitto to a gmqtt client that only acknowledges ---------------------------


def run_floor(endpoints: Endpoints, payloads: Path, qos: int, args: argparse.Namespace) -> Leg:
    topic = f"bench/{uuid.uuid4().hex[:8]}/floor"
    script = Path(__file__).with_name("_gmqtt_floor.py")
    options = {"host": endpoints.mqtt_host, "port": endpoints.mqtt_port, "topic": topic, "qos": qos}
    options |= {"count": args.messages, "receive-maximum": RECEIVE_MAXIMUM, "idle": IDLE_S}
    options["client-id"] = f"bench-floor-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, str(script), *(f"--{key}={value}" for key, value in options.items())]
    floor = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert floor.stdout is not None
    if floor.stdout.readline().strip() != "ready":
        raise SystemExit(f"the gmqtt floor client did not subscribe (exit {floor.wait(30)})")
    wall, subscriber_cpu, broker_cpu, publisher_cpu = publish_to(floor, endpoints, topic, payloads, qos, args)
    summary = dict(item.split("=") for item in floor.stdout.read().split())
    received, idle = int(summary["received"]), float(summary["idle_s"])
    return Leg(FLOOR, qos, received, wall - idle, subscriber_cpu, broker_cpu, publisher_cpu)


# --- the proxy: Mosquitto to mqtt-proxy to Kafka ----------------------------------------------


def run_proxies(
    endpoints: Endpoints, payloads: Path, warm_up: Path, qos: int, count: int, args: argparse.Namespace
) -> Leg:
    """``count`` proxies (more than one: on a shared subscription) into one fresh topic."""
    readings = unique_topic("bench.readings", endpoints.bootstrap, PARTITIONS)
    mqtt_topic = f"bench/{uuid.uuid4().hex[:8]}/proxy"
    group = f"bench{uuid.uuid4().hex[:8]}" if count > 1 else None
    proxies = [start_proxy(endpoints, mqtt_topic, readings, qos, group, args) for _ in range(count)]
    counter = RecordCounter(counting_consumer(endpoints.bootstrap, readings), proxies)
    try:
        for proxy in proxies:
            proxy.wait_ready(60)
        # The producer's connections, the encoder and the interpreter's caches warm up first.
        publisher = Publisher(endpoints, mqtt_topic, warm_up, qos, args.inflight)
        try:
            counter.until(WARM_UP, args.timeout, idle=IDLE_S if qos == 0 else None)
        finally:
            publisher.close()
        pids: dict[str, int | None] = {f"proxy{i}": proxy.process.pid for i, proxy in enumerate(proxies)}
        pids |= {"mosquitto": server_pid("mosquitto"), "kafka": server_pid("kafka")}
        meter = Meter(pids).start()
        warmed = counter.seen
        publisher = Publisher(endpoints, mqtt_topic, payloads, qos, args.inflight)
        try:
            idle = counter.until(warmed + args.messages, args.timeout, idle=IDLE_S if qos == 0 else None)
            meter.stop()
        finally:
            publisher_cpu = publisher.close()
        check_a_record(endpoints, readings)
    finally:
        counter.consumer.close()
        for proxy in proxies:
            proxy.stop()
    assert meter.cpu is not None
    cpu = meter.cpu
    proxies_cpu = sum(cpu[name] for name in pids if name.startswith("proxy"))
    name = PROXY if count == 1 else TWO_PROXIES
    received = counter.seen - warmed
    return Leg(name, qos, received, meter.wall - idle, proxies_cpu, cpu["mosquitto"], publisher_cpu, cpu["kafka"])


def start_proxy(
    endpoints: Endpoints, mqtt_topic: str, readings: str, qos: int, group: str | None, args: argparse.Namespace
) -> ProxyProcess:
    route = {
        "filter": mqtt_topic,
        "topic": readings,
        "device_from": "payload",
        "metric_from": "payload",
        "format": "json",
        "qos": qos,
    }
    port = free_port()
    client_id = f"bench-proxy-{uuid.uuid4().hex[:8]}"
    settings = {
        "ROUTES": json.dumps([route]),
        "DEADLETTER_TOPIC": unique_topic("bench.deadletter", endpoints.bootstrap, 1),
        "KAFKA__BOOTSTRAP_SERVERS": endpoints.bootstrap,
        "REGISTRY__URL": endpoints.registry_url,
        "MQTT__HOST": endpoints.mqtt_host,
        "MQTT__PORT": str(endpoints.mqtt_port),
        "MQTT__CLIENT_ID": client_id,
        "MQTT__RECEIVE_MAXIMUM": str(RECEIVE_MAXIMUM),
        # The broker forgets this run's session soon after, instead of keeping it for a day.
        "MQTT__SESSION_EXPIRY_S": "60",
        "HTTP__HOST": "127.0.0.1",
        "HTTP__PORT": str(port),
        **({"MQTT__SHARE_GROUP": group} if group else {}),
        **dict(setting.split("=", 1) for setting in args.proxy_setting),
    }
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("FLUXGATE_MQTT_")}
    env = {**inherited, **{f"FLUXGATE_MQTT_{key}": value for key, value in settings.items()}}
    # Beside the results rather than in the temporary folder, so it outlives a failed run.
    RESULTS.mkdir(exist_ok=True)
    log = RESULTS / f"mqtt_proxy.service.{client_id}.log"
    binary = Path(sys.executable).parent / "fluxgate-mqtt-proxy"
    with log.open("wb") as out:
        process = subprocess.Popen([str(binary)], env=env, stdout=out, stderr=subprocess.STDOUT)
    return ProxyProcess(process, port, log)


def counting_consumer(bootstrap: str, topic: str) -> Consumer:
    """Reads every partition from the start, without a group to join (no rebalance to wait for)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            # The last records would otherwise wait up to 500 ms in the broker, inflating short runs.
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in range(PARTITIONS)])
    return consumer


@dataclass
class RecordCounter:
    """Counts what arrives in the readings topic, without decoding anything."""

    consumer: Consumer
    proxies: list[ProxyProcess]
    seen: int = 0

    def until(self, target: int, timeout: float, idle: float | None = None) -> float:
        """Return once ``target`` records arrived in total, or (with ``idle``) none for that long:
        how long it waited for nothing (0 when the target was reached)."""
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while self.seen < target:
            arrived = sum(1 for message in self.consumer.consume(10_000, 0.05) if message.error() is None)
            now = time.monotonic()
            if arrived:
                self.seen, last = self.seen + arrived, now
            elif idle is not None and now - last > idle:
                return now - last
            if now > deadline:
                logs = ", ".join(str(proxy.log) for proxy in self.proxies)
                raise SystemExit(f"only {self.seen} of {target} readings reached Kafka in {timeout:.0f}s; see {logs}")
            for proxy in self.proxies:
                proxy.check_alive()
        return 0.0


def check_a_record(endpoints: Endpoints, topic: str) -> None:
    """The counted records must be real readings, not dead letters or garbage."""
    consumer = counting_consumer(endpoints.bootstrap, topic)
    try:
        message = next(m for m in iter(lambda: consumer.poll(10), None) if m.error() is None)
    finally:
        consumer.close()
    decoder = AvroDecoder(SchemaRegistryClient({"url": endpoints.registry_url}), schema_dict(SENSOR_READING))
    record = decoder.decode(message.value() or b"")
    if record["metric"] != "temperature" or not str(record["device_id"]).startswith("Sensor"):
        raise SystemExit(f"unexpected reading in {topic}: {record}")


# --- report ------------------------------------------------------------------------------------


def print_legs(legs: list[Leg], qos: int, args: argparse.Namespace) -> None:
    header = ["leg", "msgs", "seconds", "msgs/s", "subscriber µs CPU/msg", "mosquitto µs/msg", "kafka µs/msg"]
    rows = [
        [
            leg.name,
            leg.messages,
            leg.seconds,
            leg.per_second,
            *(micros_per(cpu, leg.messages) for cpu in (leg.subscriber_cpu, leg.broker_cpu, leg.kafka_cpu)),
        ]
        for leg in legs
    ]
    title = f"MQTT QoS {qos}, {args.messages} JSON readings, publisher mosquitto_pub -M {args.inflight}"
    print_table(title, header, rows)


def ratios(legs: list[Leg]) -> dict[str, float]:
    """Per QoS: the proxy against each baseline (rate and subscriber CPU), and 1 -> 2 proxies."""
    found: dict[str, float] = {}
    by_key = {(leg.qos, leg.name): leg for leg in legs}
    for qos in sorted({leg.qos for leg in legs}):
        proxy = by_key.get((qos, PROXY))
        if proxy is None:
            continue
        for base, label in ((BASELINE, "baseline"), (FLOOR, "gmqtt_floor")):
            other = by_key.get((qos, base))
            if other is not None:
                found[f"qos{qos}_throughput_proxy_over_{label}"] = proxy.per_second / other.per_second
                cpu = proxy.subscriber_cpu / proxy.messages / (other.subscriber_cpu / other.messages)
                found[f"qos{qos}_cpu_per_message_proxy_over_{label}"] = cpu
        two = by_key.get((qos, TWO_PROXIES))
        if two is not None:
            found[f"qos{qos}_throughput_two_proxies_over_one"] = two.per_second / proxy.per_second
    return found


def report(legs: list[Leg], args: argparse.Namespace) -> None:
    found = ratios(legs)
    print()
    for key, value in found.items():
        print(f"{key}: {value:.2f}")
    print("(broker CPU is of the shared stack servers: other clients' load lands there too)")
    settings = {"messages": args.messages, "devices": DEVICES, "publisher_inflight": args.inflight}
    settings |= {"receive_maximum": RECEIVE_MAXIMUM, "proxy_settings": " ".join(args.proxy_setting) or "defaults"}
    title = "MQTT -> Kafka: mqtt-proxy against mosquitto_sub and a bare gmqtt client"
    paths = write_report("mqtt_proxy", title, "msg", [leg.result() for leg in legs], found, settings)
    print("written to " + ", ".join(str(path) for path in paths))


if __name__ == "__main__":
    sys.exit(main())
