"""Running ``fluxgate connect <fixture>`` as its own process, the way a user starts it, and the
records it moves (never imported at run time)."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from connect_fixtures import FIXTURES
from fluxgate_testing import ServiceProcess, free_port, unique_topic
from fluxgate_testing.aggregates import temperature_aggregate

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroEncoder

FLUXGATE = str(Path(sys.executable).with_name("fluxgate"))
KEYSPACE = "fluxgate_connect"  # where tests of Cassandra sink configs make their tables
DAY = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)  # the daily index is temperatures-2026.03.14


def connect(
    fixture: str | Path, prefix: str, stack: Any, placeholders: dict[str, str], tasks: int = 1
) -> ServiceProcess:
    """The service the fixture's connector config describes (a name in FIXTURES or a path), started
    through ``fluxgate connect``; with ``tasks`` members, health on consecutive ports (member 0's
    is the process's). Besides the placeholders, only what a Kafka Connect worker (not the connector)
    would hold: Kafka, the registry, and where the health endpoint listens (and a sink's batch age:
    tests wait less)."""
    port = free_ports(tasks)
    worker = {"KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap, "REGISTRY__URL": stack.registry_url,
              "HTTP__HOST": "127.0.0.1", "HTTP__PORT": str(port)}  # fmt: skip
    if prefix in ("FLUXGATE_ES_", "FLUXGATE_SCYLLA_", "FLUXGATE_HZ_"):
        worker["SINK__BATCH_AGE_MS"] = "100"
    env = {**placeholders, **{prefix + name: value for name, value in worker.items()}}
    return ServiceProcess(
        [FLUXGATE, "connect", str(FIXTURES / fixture)], env, health_port=port, isolate_prefix="FLUXGATE_"
    )


def run_until(
    fixture: str | Path, prefix: str, stack: Any, done: Callable[[], bool], what: str, timeout: float
) -> ServiceProcess:
    """``fluxgate connect <fixture>`` (no placeholders) until ``done``, then stopped: it must exit 0."""
    with connect(fixture, prefix, stack, {}) as service:
        service.start()
        service.wait_until(done, what, timeout)
        assert service.terminate() == 0, service.log_tail()
    return service


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports nothing listens on right now."""
    while True:
        first = free_port()
        try:
            with contextlib.ExitStack() as bound:
                for port in range(first + 1, first + count):
                    bound.enter_context(socket.create_server(("127.0.0.1", port)))
        except OSError:
            continue
        return first


def member(service: ServiceProcess, index: int) -> ServiceProcess:
    """Member ``index``'s health endpoint, to probe (never started: ``service`` runs it)."""
    return ServiceProcess([], {}, health_port=service.health_port + index, log_path=Path(os.devnull))


def aggregates(count: int) -> list[dict[str, Any]]:
    """``count`` TemperatureAggregates of ``DAY``, from devices no other test writes."""
    run = uuid.uuid4().hex[:8]
    out = []
    for n in range(count):
        start = DAY + timedelta(minutes=n)
        out.append(temperature_aggregate(
            f"connect-{run}-{n % 5}", start, min=20.0, max=22.0 + n, mean=21.0, stddev=0.5,
            last_event_time=start + timedelta(seconds=59),
        ))  # fmt: skip
    return out


def produce_aggregates(stack: Any, registry_client: Any, prefix: str, values: list[dict[str, Any]]) -> str:
    """A fresh topic holding ``values`` as Avro (Confluent wire format, schema registered)."""
    topic = unique_topic(prefix, stack.bootstrap)
    produce_to(stack, registry_client, topic, values)
    return topic


def produce_to(stack: Any, registry_client: Any, topic: str, values: list[dict[str, Any]]) -> None:
    """``values`` as Avro on ``topic``, keyed by device."""
    encoder = AvroEncoder.registered(
        registry_client, topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, encoder.encode(value), value["device_id"].encode())
    assert producer.flush(30) == 0


def group_members(bootstrap: str, group: str) -> dict[str, int]:
    """A Stable consumer group's static members (group.instance.id) and how many partitions each
    holds; empty while the group is not Stable."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [description] = [future.result(30) for future in admin.describe_consumer_groups([group]).values()]
    if description.state != ConsumerGroupState.STABLE:
        return {}
    return {str(m.group_instance_id): len(m.assignment.topic_partitions) for m in description.members}


def record_count(bootstrap: str, topic: str) -> int:
    """How many records ``topic`` holds: the sum of its partitions' end offsets (never compacted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)
    finally:
        consumer.close()


def lines(*keys: str) -> str:
    """A ``.properties`` text of ``keys`` (``key=value`` lines and comments)."""
    return "".join(f"{key}\n" for key in keys)


def produce(bootstrap: str, topic: str, records: list[tuple[str, bytes]]) -> None:
    """``(key, value)`` records into partition 0 of ``topic``, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, value, key.encode(), partition=0)  # one partition: the order is the test's
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str) -> int:
    """The offset ``group`` committed on partition 0 of ``topic`` (negative: none yet)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [position] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return int(position.offset)
    finally:
        consumer.close()


def documents(elasticsearch: str, index: str) -> dict[str, dict[str, Any]]:
    """The documents of ``index`` by id, once refreshed (none while it does not exist)."""
    httpx.post(f"{elasticsearch}/{index}/_refresh")
    answer = httpx.get(f"{elasticsearch}/{index}/_search", params={"size": 100}).json()
    return {hit["_id"]: hit["_source"] for hit in answer.get("hits", {}).get("hits", [])}


@contextlib.contextmanager
def cql_table(cassandra: tuple[str, int], table: str, columns: str) -> Iterator[Any]:
    """A session on the stack's Cassandra with table ``KEYSPACE.table`` made (``columns``: its
    CQL columns and key), dropped and the session closed after."""
    from cassandra.cluster import Cluster

    host, port = cassandra
    cluster = Cluster([host], port=port)
    try:
        session = cluster.connect()
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} "
                        "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")  # fmt: skip
        session.execute(f"CREATE TABLE {KEYSPACE}.{table} ({columns})")
        try:
            yield session
        finally:
            session.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{table}")
    finally:
        cluster.shutdown()


def cassandra_10_config(path: Path, name: str, topic: str, kcql: str, cassandra: tuple[str, int], *more: str) -> Path:
    """A Stream-Reactor 10.x Cassandra sink config at ``path``, written for a test: its name,
    topic, KCQL and the stack's Cassandra, then ``more`` lines (converters, error keys)."""
    host, port = cassandra
    path.write_text(lines(
        "# A Stream-Reactor 10.x Cassandra sink, written for a test",
        f"name={name}",
        "connector.class=io.lenses.streamreactor.connect.cassandra.CassandraSinkConnector",
        f"topics={topic}",
        f"connect.cassandra.kcql={kcql}",
        f"connect.cassandra.contact.points={host}",
        f"connect.cassandra.port={port}",
        *more,
    ))  # fmt: skip
    return path


def own_names(stack: Any, what: str) -> tuple[str, str, str]:
    """A table, a connector name and a topic of one partition, this test's own, named after ``what``."""
    run = uuid.uuid4().hex[:8]
    return f"{what}_{run}", f"connect-{what}-{run}", unique_topic(f"connect.{what}", stack.bootstrap, partitions=1)
