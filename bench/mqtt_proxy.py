"""MQTT-to-Kafka throughput of mqtt-proxy next to Mosquitto's own delivery, measured in one run.

Both legs publish the same JSON readings with ``mosquitto_pub -l`` at the same QoS:

* baseline: Mosquitto delivers them to ``mosquitto_sub`` (a C client that only prints them);
* proxy: the real ``fluxgate-mqtt-proxy`` process turns them into Avro SensorReadings in a
  fresh Kafka topic, and a consumer here counts the records (no decoding while timed).

Each leg is timed from the first publish to the last message received, and the CPU of the
subscriber (``mosquitto_sub`` or the proxy) is read from the kernel. Results:
``bench-results/mqtt_proxy.json``.
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

from _common import RESULTS, Meter, micros_per, print_table, reap, server_pid, stack_up, write_results
from _mqtt import ProxyProcess, Publisher, mqtt_client
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient

from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroDecoder
from fluxgate_core.testing import free_port, unique_topic
from fluxgate_stack import Endpoints, StackSettings

DEVICES = 1000
WARM_UP = 2000
PARTITIONS = 3
FIRST_TIMESTAMP_MS = 1_486_997_194_029  # the reading format of the original issue


@dataclass(frozen=True)
class Leg:
    """What one leg measured."""

    name: str
    messages: int
    seconds: float
    subscriber_cpu: float
    broker_cpu: float
    publisher_cpu: float
    kafka_cpu: float = 0.0

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "seconds": round(self.seconds, 3),
            "per_second": round(self.per_second),
            "subscriber_cpu_us_per_message": micros_per(self.subscriber_cpu, self.messages),
            "mosquitto_cpu_us_per_message": micros_per(self.broker_cpu, self.messages),
            "kafka_cpu_us_per_message": micros_per(self.kafka_cpu, self.messages),
            "publisher_cpu_us_per_message": micros_per(self.publisher_cpu, self.messages),
        }


def main() -> int:
    args = parse_args()
    queue_limit = StackSettings().mqtt_max_queued_messages
    if queue_limit and args.messages > queue_limit:
        print(f"warning: more messages than Mosquitto queues per session ({queue_limit}): a slow proxy may lose some")
    endpoints = stack_up()
    with tempfile.TemporaryDirectory(prefix="fluxgate-bench-") as tmp:
        work = Path(tmp)
        payloads = write_payloads(work / "readings.jsonl", args.messages, offset=WARM_UP)
        warm_up = write_payloads(work / "warm-up.jsonl", WARM_UP, offset=0)
        baseline = run_baseline(endpoints, payloads, args)
        proxy = run_proxy(endpoints, payloads, warm_up, args)
    report(baseline, proxy, args)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000, help="readings per leg (default: 100000)")
    parser.add_argument("--qos", type=int, choices=(1, 2), default=1, help="QoS of publisher and subscribers")
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


def run_baseline(endpoints: Endpoints, payloads: Path, args: argparse.Namespace) -> Leg:
    topic, client_id = f"bench/{uuid.uuid4().hex[:8]}/baseline", f"bench-sub-{uuid.uuid4().hex[:8]}"
    session = ("-t", topic, "-q", str(args.qos), "-i", client_id)
    # A persistent session subscribed before anything is published: messages sent while the
    # measured subscriber is still connecting are queued for it rather than lost.
    subprocess.run(mqtt_client(endpoints, "mosquitto_sub", *session, "-c", "-E"), check=True, timeout=30)
    try:
        count = ("-C", str(args.messages))
        subscriber = subprocess.Popen(
            mqtt_client(endpoints, "mosquitto_sub", *session, "-c", *count), stdout=subprocess.DEVNULL
        )
        meter = Meter({"mosquitto": server_pid("mosquitto")}).start()
        publisher = Publisher(endpoints, topic, payloads, args.qos, args.inflight)
        try:
            subscriber_cpu = reap(subscriber, args.timeout)
            meter.stop()
        finally:
            publisher_cpu = publisher.close()
    finally:
        # A clean-session connect discards the persistent session on the shared broker.
        subprocess.run(mqtt_client(endpoints, "mosquitto_sub", *session, "-E"), check=False, timeout=30)
    assert meter.cpu is not None
    return Leg(
        "mosquitto -> mosquitto_sub", args.messages, meter.wall, subscriber_cpu, meter.cpu["mosquitto"], publisher_cpu
    )


# --- the proxy: Mosquitto to mqtt-proxy to Kafka ----------------------------------------------


def run_proxy(endpoints: Endpoints, payloads: Path, warm_up: Path, args: argparse.Namespace) -> Leg:
    readings = unique_topic("bench.readings", endpoints.bootstrap, PARTITIONS)
    mqtt_topic = f"bench/{uuid.uuid4().hex[:8]}/proxy"
    proxy = start_proxy(endpoints, mqtt_topic, readings, args)
    counter = RecordCounter(counting_consumer(endpoints.bootstrap, readings))
    try:
        proxy.wait_ready(60)
        # The producer's connections, the encoder and the interpreter's caches warm up first.
        publisher = Publisher(endpoints, mqtt_topic, warm_up, args.qos, args.inflight)
        try:
            counter.until(WARM_UP, proxy, args.timeout)
        finally:
            publisher.close()
        pids = {"proxy": proxy.process.pid, "mosquitto": server_pid("mosquitto"), "kafka": server_pid("kafka")}
        meter = Meter(pids).start()
        publisher = Publisher(endpoints, mqtt_topic, payloads, args.qos, args.inflight)
        try:
            counter.until(WARM_UP + args.messages, proxy, args.timeout)
            meter.stop()
        finally:
            publisher_cpu = publisher.close()
        check_a_record(endpoints, readings)
    finally:
        counter.consumer.close()
        proxy.stop()
    assert meter.cpu is not None
    cpu = meter.cpu
    return Leg(
        "mosquitto -> mqtt-proxy -> Kafka",
        args.messages,
        meter.wall,
        cpu["proxy"],
        cpu["mosquitto"],
        publisher_cpu,
        cpu["kafka"],
    )


def start_proxy(endpoints: Endpoints, mqtt_topic: str, readings: str, args: argparse.Namespace) -> ProxyProcess:
    route = {
        "filter": mqtt_topic,
        "topic": readings,
        "device_from": "payload",
        "metric_from": "payload",
        "format": "json",
        "qos": args.qos,
    }
    port = free_port()
    settings = {
        "ROUTES": json.dumps([route]),
        "DEADLETTER_TOPIC": unique_topic("bench.deadletter", endpoints.bootstrap, 1),
        "KAFKA__BOOTSTRAP_SERVERS": endpoints.bootstrap,
        "REGISTRY__URL": endpoints.registry_url,
        "MQTT__HOST": endpoints.mqtt_host,
        "MQTT__PORT": str(endpoints.mqtt_port),
        "MQTT__CLIENT_ID": f"bench-proxy-{uuid.uuid4().hex[:8]}",
        # The broker forgets this run's session soon after, instead of keeping it for a day.
        "MQTT__SESSION_EXPIRY_S": "60",
        "HTTP__HOST": "127.0.0.1",
        "HTTP__PORT": str(port),
        **dict(setting.split("=", 1) for setting in args.proxy_setting),
    }
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("FLUXGATE_MQTT_")}
    env = {**inherited, **{f"FLUXGATE_MQTT_{key}": value for key, value in settings.items()}}
    # Beside the results rather than in the temporary folder, so it outlives a failed run.
    RESULTS.mkdir(exist_ok=True)
    log = RESULTS / "mqtt_proxy.service.log"
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
    seen: int = 0

    def until(self, target: int, proxy: ProxyProcess, timeout: float) -> None:
        """Return once ``target`` records arrived in total."""
        deadline = time.monotonic() + timeout
        while self.seen < target:
            self.seen += sum(1 for message in self.consumer.consume(10_000, 0.05) if message.error() is None)
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"only {self.seen} of {target} readings reached Kafka in {timeout:.0f}s; see {proxy.log}"
                )
            proxy.check_alive()


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


def report(baseline: Leg, proxy: Leg, args: argparse.Namespace) -> None:
    legs = (baseline, proxy)
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
    print_table(
        f"MQTT QoS {args.qos}, {args.messages} JSON readings, publisher mosquitto_pub -M {args.inflight}", header, rows
    )
    throughput = proxy.per_second / baseline.per_second
    cpu = proxy.subscriber_cpu / baseline.subscriber_cpu if baseline.subscriber_cpu else float("inf")
    print(f"\nproxy / baseline: throughput {throughput:.2f}x, subscriber CPU per message {cpu:.1f}x")
    print("(broker CPU is of the shared stack servers: other clients' load lands there too)")
    path = write_results(
        "mqtt_proxy",
        {
            "qos": args.qos,
            "publisher_inflight": args.inflight,
            "baseline": baseline.as_dict(),
            "proxy": proxy.as_dict(),
            "ratio": {
                "throughput_proxy_over_baseline": round(throughput, 3),
                "subscriber_cpu_proxy_over_baseline": round(cpu, 2),
            },
        },
    )
    print(f"written to {path}")


if __name__ == "__main__":
    sys.exit(main())
