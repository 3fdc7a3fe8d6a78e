"""Kafka's SASL_SSL listener on the real broker: SCRAM logins over TLS from the stack's CA,
ACLs per principal, the PLAINTEXT listener unchanged, and each service's grants enough for
its work (on topics and groups of the test's own, so nothing shared is written)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from fluxgate_testing.secured import Principal, SecuredKafka

from fluxgate_stack import SERVICE_GRANTS, Endpoints, Grant, StackSettings, renamed
from fluxgate_stack.topics import create_topics

pytestmark = pytest.mark.integration

TIMEOUT = 15.0


def unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:10]}"


def produce(config: dict[str, Any], topic: str, value: bytes = b"v", **extra: Any) -> KafkaError | None:
    """One record through an idempotent producer (what the services use): its delivery error."""
    outcome: list[KafkaError | None] = []
    options = {"enable.idempotence": True, "acks": "all", "message.timeout.ms": 10_000}
    options.update({key.replace("_", "."): value for key, value in extra.items()})
    producer = Producer({**config, **options})
    producer.produce(topic, value, b"key", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(TIMEOUT)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def consume_one(config: dict[str, Any], topic: str, group: str, *, commit: bool = True) -> bytes:
    """Join ``group`` on ``topic``, read one record and commit it; any error fails."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            if commit:
                consumer.commit(message, asynchronous=False)
            return bytes(message.value())
        raise AssertionError(f"nothing read from {topic} in {TIMEOUT}s")
    finally:
        consumer.close()


def read_assigned(
    config: dict[str, Any], topic: str, group: str, isolation: str = "read_committed", expected: int = 1
) -> list[bytes]:
    """Read ``expected`` records of ``topic`` from the start by assigned partitions (a group
    never joined); any error fails."""
    consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False, "isolation.level": isolation})
    out: list[bytes] = []
    try:
        partitions = consumer.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions
        consumer.assign([TopicPartition(topic, partition, 0) for partition in partitions])
        deadline = time.monotonic() + TIMEOUT
        while len(out) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            out.append(bytes(message.value()))
    finally:
        consumer.close()
    return out


def reported_errors(config: dict[str, Any], seconds: float = 1.5) -> list[KafkaError]:
    """What librdkafka reports through ``error_cb`` while a client asks for metadata."""
    errors: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": errors.append, "log_level": 0})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=seconds)
    admin.poll(0.5)  # serves the error callbacks still queued
    return errors


@pytest.fixture
def topic(stack: Endpoints) -> str:
    name = unique("secured")
    create_topics(stack.bootstrap, {name: 1})
    return name


def test_endpoints_name_the_secure_listener(stack: Endpoints, secured_kafka: SecuredKafka) -> None:
    settings = StackSettings()
    assert stack.secure_bootstrap == f"{settings.host}:{settings.kafka_secure_port}"
    assert secured_kafka.bootstrap == stack.secure_bootstrap
    assert secured_kafka.ca_file == stack.ca_file
    assert stack.ca_file.read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")


def test_principal_produces_and_consumes_its_topic(stack: Endpoints, secured_kafka: SecuredKafka, topic: str) -> None:
    group = unique("secured-group")
    principal = secured_kafka.principal(
        "reader-writer", [Grant("topic", topic, ("READ", "WRITE", "DESCRIBE")), Grant("group", group, ("READ",))]
    )
    assert principal.password_file.stat().st_mode & 0o777 == 0o600
    assert principal.password_file.read_text() == principal.password
    # Idempotent, acks=all: with WRITE on the topic Kafka 4 asks for nothing on the cluster.
    assert produce(principal.kafka_config(), topic, b"secret reading") is None
    assert consume_one(principal.kafka_config(), topic, group) == b"secret reading"


def test_principal_is_refused_a_topic_without_a_grant(stack: Endpoints, secured_kafka: SecuredKafka) -> None:
    mine, other = unique("secured-mine"), unique("secured-other")
    create_topics(stack.bootstrap, {mine: 1, other: 1})
    principal = secured_kafka.principal("writer", [Grant("topic", mine, ("WRITE", "DESCRIBE"))])
    assert produce(principal.kafka_config(), mine) is None
    refused = produce(principal.kafka_config(), other)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as read:
        consume_one(principal.kafka_config(), mine, unique("secured-group"))
    assert read.value.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


def test_wrong_password_fails_authentication(secured_kafka: SecuredKafka) -> None:
    principal = secured_kafka.principal("wrong-password", [])
    errors = reported_errors({**principal.kafka_config(), "sasl.password": "not-" + principal.password})
    refusals = [error for error in errors if error.code() == KafkaError._AUTHENTICATION]
    assert refusals, errors
    assert "SASL authentication error" in refusals[0].str()


def test_client_that_does_not_trust_the_ca_fails_the_handshake(secured_kafka: SecuredKafka) -> None:
    principal = secured_kafka.principal("untrusting", [])
    config = principal.kafka_config()
    del config["ssl.ca.location"]  # the system's CAs only
    errors = reported_errors(config)
    handshakes = [error for error in errors if error.code() == KafkaError._SSL]
    assert handshakes, errors
    assert "certificate verify failed" in handshakes[0].str()


def test_plaintext_listener_needs_no_credentials(stack: Endpoints, secured_kafka: SecuredKafka) -> None:
    name = unique("plaintext")
    plain = {"bootstrap.servers": stack.bootstrap}
    admin = AdminClient(plain)  # kept until the answer is in: dropping it cancels the request
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)  # ANONYMOUS is the super user: anything goes
    assert produce(plain, name, b"lab") is None
    assert consume_one(plain, name, unique("plaintext-group")) == b"lab"


def test_a_principal_removed_cannot_log_in(secured_kafka: SecuredKafka, topic: str) -> None:
    from fluxgate_stack import remove_principal

    principal = secured_kafka.principal("removed", [Grant("topic", topic, ("DESCRIBE",))])
    AdminClient(principal.kafka_config()).list_topics(timeout=TIMEOUT)
    remove_principal(principal.username)
    remove_principal(principal.username)  # idempotent
    deadline = time.monotonic() + TIMEOUT
    while True:  # a removed credential reaches the broker asynchronously, like an added one
        errors = reported_errors(principal.kafka_config(), seconds=1.0)
        if any(error.code() == KafkaError._AUTHENTICATION for error in errors) or time.monotonic() > deadline:
            break
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors


def test_kafka_env_is_a_services_settings(secured_kafka: SecuredKafka, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_settings import BaseSettings

    from fluxgate_core.settings import KafkaSettings, group, load_settings, service_config

    class Service(BaseSettings):
        model_config = service_config("FLUXGATE_SECURED_TEST_")
        kafka: KafkaSettings = group(KafkaSettings)

    principal = secured_kafka.principal("env", [])
    for key, value in principal.kafka_env("FLUXGATE_SECURED_TEST_").items():
        monkeypatch.setenv(key, value)
    kafka = load_settings(Service).kafka
    assert kafka.client_config("test") == {**principal.kafka_config(), "client.id": "test"}
    AdminClient(kafka.client_config("test")).list_topics(timeout=TIMEOUT)  # it logs in


# --- each service's grants, on the test's own names -------------------------------------------


class Names:
    """Each default topic, group and prefix the grants name, made unique to one test."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:8]
        self.map: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name not in self.map:
            self.map[name] = f"{name}{self.tag}-" if name.endswith("-") else f"{name}-{self.tag}"
        return self.map[name]

    def grants(self, service: str) -> tuple[Grant, ...]:
        for grant in SERVICE_GRANTS[service]:
            self(grant.name)
        return renamed(SERVICE_GRANTS[service], self.map)


def _gateway(config: dict[str, Any], n: Names, bootstrap: str) -> None:
    readings, dead = n("sensors.readings"), n("sensors.deadletter")
    create_topics(bootstrap, {readings: 1, dead: 1})
    resources = [ConfigResource(ResourceType.TOPIC, readings), ConfigResource(ResourceType.TOPIC, dead)]
    admin = AdminClient(config)
    for future in admin.describe_configs(resources).values():  # fluxgate_core.batches
        assert int(future.result(TIMEOUT)["max.message.bytes"].value) > 0
    assert produce(config, readings) is None
    assert produce(config, dead) is None
    _refused_write(config, n("sensors.deadletter-elsewhere"), bootstrap)


def _aggregator(config: dict[str, Any], n: Names, bootstrap: str) -> None:
    readings = n("sensors.readings")
    outputs = [n("temperatures.aggregated"), n("temperatures.late"), n("sensors.deadletter")]
    create_topics(bootstrap, {readings: 1, **dict.fromkeys(outputs, 1)})
    _plain_produce(bootstrap, readings)
    # Spark's source: offsets through an admin client, records by assigned partitions.
    admin = AdminClient(config)
    ends = admin.list_offsets({TopicPartition(readings, 0): OffsetSpec.latest()})
    assert [future.result(TIMEOUT).offset for future in ends.values()] == [1]
    assert read_assigned(config, readings, n("fluxgate-aggregator-watermarks")) == [b"input"]
    for output in outputs:
        assert produce(config, output) is None
    # The progress group: offsets committed by a consumer that never subscribes (offsets.py).
    committer = Consumer({**config, "group.id": n("fluxgate-aggregator"), "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(readings, 0, 1)], asynchronous=False)
    finally:
        committer.close()
    _refused_write(config, readings, bootstrap)


def _device_status(config: dict[str, Any], n: Names, bootstrap: str) -> None:
    readings, status = n("sensors.readings"), n("devices.status")
    create_topics(bootstrap, {readings: 1, status: 1})
    _plain_produce(bootstrap, readings)
    assert consume_one(config, readings, n("fluxgate-device-status")) == b"input"
    assert produce(config, status) is None
    # faust's own topics, named after the app id: created, written and read back.
    changelog = n("fluxgate-device-status-") + "devices-changelog"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(changelog, 1, 1, config={"cleanup.policy": "compact"})])[changelog].result(TIMEOUT)
    assert produce(config, changelog, b"state", enable_idempotence=False) is None  # aiokafka's default
    assert read_assigned(config, changelog, n("fluxgate-device-status"), "read_uncommitted") == [b"state"]
    assert read_assigned(config, readings, n("device-status-watermarks")) == [b"input"]
    _refused_write(config, readings, bootstrap)


def _persister(config: dict[str, Any], n: Names, bootstrap: str, service: str) -> None:
    from fluxgate_core.kafka import ensure_topics

    aggregated, dead = n("temperatures.aggregated"), n("persisters.deadletter")
    create_topics(bootstrap, {aggregated: 1})
    _plain_produce(bootstrap, aggregated)
    ensure_topics(config, {dead: 3})  # the sink runtime, at start
    ensure_topics(config, {dead: 3})  # and at the next start, the topic there
    assert produce(config, dead) is None
    assert consume_one(config, aggregated, n(f"fluxgate-{service}")) == b"input"
    _refused_write(config, aggregated, bootstrap)


def _console(config: dict[str, Any], n: Names, bootstrap: str) -> None:
    topics = [
        n(name) for name in ("sensors.readings", "temperatures.aggregated", "temperatures.late", "devices.status")
    ]
    dead = [n("sensors.deadletter"), n("persisters.deadletter")]
    create_topics(bootstrap, dict.fromkeys([*topics, *dead], 1))
    for name in dead:
        _plain_produce(bootstrap, name)
    group = n("fluxgate-es-persister")
    consume_one({"bootstrap.servers": bootstrap}, dead[1], group)  # a group with members gone and offsets
    admin = AdminClient(config)
    metadata = admin.list_topics(timeout=TIMEOUT)
    assert set(topics + dead) <= set(metadata.topics)
    ends = admin.list_offsets({TopicPartition(name, 0): OffsetSpec.latest() for name in topics + dead})
    assert sorted(future.result(TIMEOUT).offset for future in ends.values()) == [0, 0, 0, 0, 1, 1]
    groups = [n(name) for name in ("fluxgate-aggregator", "fluxgate-device-status", "fluxgate-scylla-persister")]
    for name, future in admin.describe_consumer_groups([*groups, group]).items():
        assert future.result(TIMEOUT).group_id == name  # an unknown group is described too (DEAD)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT)
    assert [(tp.topic, tp.offset) for tp in listed.topic_partitions] == [(dead[1], 1)]
    for name in dead:
        assert read_assigned(config, name, n("console-reader")) == [b"input"]
    _refused_write(config, dead[0], bootstrap)  # read-only


def _console_replay(config: dict[str, Any], n: Names, bootstrap: str) -> None:
    from fluxgate_core.kafka import ensure_topics

    audit, readings, aggregated = n("console.replays"), n("sensors.readings"), n("temperatures.aggregated")
    create_topics(bootstrap, {readings: 1, aggregated: 1})
    ensure_topics(config, {audit: 1})  # on first use
    producer = Producer({**config, "transactional.id": n("fluxgate-console-replay"), "linger.ms": 0})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(readings, b"replayed")
    producer.produce(aggregated, b"replayed")
    producer.produce(audit, b"audit")
    producer.commit_transaction(TIMEOUT)
    assert read_assigned(config, audit, n("console-audit")) == [b"audit"]


def _plain_produce(bootstrap: str, topic: str) -> None:
    assert produce({"bootstrap.servers": bootstrap}, topic, b"input") is None


def _refused_write(config: dict[str, Any], topic: str, bootstrap: str) -> None:
    create_topics(bootstrap, {topic: 1})
    # Not idempotent: a principal that may write nowhere would be refused its producer id first.
    refused = produce(config, topic, enable_idempotence=False)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


ROLES: dict[str, Callable[[dict[str, Any], Names, str], None]] = {
    "mqtt-proxy": _gateway,
    "coap-ingest": _gateway,
    "aggregator": _aggregator,
    "device-status": _device_status,
    "es-persister": lambda c, n, b: _persister(c, n, b, "es-persister"),
    "scylla-persister": lambda c, n, b: _persister(c, n, b, "scylla-persister"),
    "hazelcast-persister": lambda c, n, b: _persister(c, n, b, "hazelcast-persister"),
    "console": _console,
}


def test_every_service_has_grants() -> None:
    assert set(ROLES) <= set(SERVICE_GRANTS)
    assert set(SERVICE_GRANTS) - set(ROLES) == {"console-replay"}


@pytest.mark.parametrize("service", sorted(ROLES))
def test_service_grants_let_the_service_work(stack: Endpoints, secured_kafka: SecuredKafka, service: str) -> None:
    names = Names()
    principal: Principal = secured_kafka.principal(service, names.grants(service))
    ROLES[service](principal.kafka_config(), names, stack.bootstrap)


def test_console_replay_grants_let_the_console_replay(stack: Endpoints, secured_kafka: SecuredKafka) -> None:
    names = Names()
    principal = secured_kafka.principal("console", [*names.grants("console"), *names.grants("console-replay")])
    _console_replay(principal.kafka_config(), names, stack.bootstrap)
