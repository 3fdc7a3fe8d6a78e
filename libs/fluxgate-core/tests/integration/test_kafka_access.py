"""verify_kafka against the real broker: its SASL_SSL listener (SCRAM, ACLs) and its plaintext one."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from fluxgate_testing import unique_topic

from fluxgate_core.errors import ConfigError, DeliveryError
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.settings import KafkaSettings, TopicCreationSettings
from fluxgate_stack import Grant

pytestmark = pytest.mark.integration
PREFIX = "FLUXGATE_DEMO_"
SYSTEM_CAS = "/etc/ssl/certs/ca-certificates.crt"  # Debian's bundle: trusts nothing the stack signed


def secured(principal: Any, **changes: Any) -> KafkaSettings:
    values = {
        "bootstrap_servers": principal.bootstrap,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": principal.mechanism,
        "sasl_username": principal.username,
        "sasl_password_file": principal.password_file,
        "ssl_ca_location": str(principal.ca_file),
        **changes,
    }
    return KafkaSettings(**values)


@pytest.fixture(scope="module")
def topic(stack: Any) -> str:
    return unique_topic("test.access", stack.bootstrap)


@pytest.fixture(scope="module")
def reader(secured_kafka: Any, topic: str) -> Any:
    return secured_kafka.principal("reader", [Grant("topic", topic, ("READ", "DESCRIBE"))])


def test_a_principal_with_its_grants_passes(reader: Any, topic: str) -> None:
    verify_kafka(secured(reader), "demo", PREFIX, [topic])


def test_a_wrong_password_names_the_credential_settings_not_the_password(reader: Any, tmp_path: Path) -> None:
    wrong = tmp_path / "password"
    wrong.write_text("not-" + reader.password)
    with pytest.raises(ConfigError) as error:
        verify_kafka(secured(reader, sasl_password_file=wrong), "demo", PREFIX)
    message = str(error.value)
    assert f"[env {PREFIX}KAFKA__SASL_USERNAME, {PREFIX}KAFKA__SASL_PASSWORD_FILE]" in message
    assert reader.username in message and "invalid credentials" in message
    assert reader.password not in message


def test_an_unknown_user_is_refused_the_same_way(reader: Any) -> None:
    with pytest.raises(ConfigError, match=r"KAFKA__SASL_USERNAME.*refused the login of 'nobody-here'"):
        verify_kafka(secured(reader, sasl_username="nobody-here"), "demo", PREFIX)


def test_a_ca_that_did_not_sign_the_broker_names_ssl_ca_location(reader: Any) -> None:
    with pytest.raises(ConfigError, match=rf"\[env {PREFIX}KAFKA__SSL_CA_LOCATION\].*handshake"):
        verify_kafka(secured(reader, ssl_ca_location=SYSTEM_CAS), "demo", PREFIX)


def test_a_topic_without_a_grant_is_named_as_forbidden_not_missing(reader: Any, stack: Any) -> None:
    other = unique_topic("test.access.other", stack.bootstrap)
    with pytest.raises(ConfigError) as error:
        verify_kafka(secured(reader), "demo", PREFIX, [other])
    assert f"{other}: {reader.username} may not use it (an ACL is missing)" in str(error.value)


def test_a_missing_topic_is_named(stack: Any) -> None:
    with pytest.raises(ConfigError, match=r"test\.access\.nowhere: no such topic"):
        verify_kafka(KafkaSettings(bootstrap_servers=stack.bootstrap), "demo", PREFIX, ["test.access.nowhere"])


def test_no_broker_names_bootstrap_servers() -> None:
    with pytest.raises(DeliveryError, match=rf"\[env {PREFIX}KAFKA__BOOTSTRAP_SERVERS\]: no broker answered"):
        verify_kafka(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "demo", PREFIX, timeout=2)


def test_a_missing_topic_is_created_as_the_creation_settings_say(stack: Any) -> None:
    topic = f"test.access.created.{uuid.uuid4().hex[:10]}"
    creation = TopicCreationSettings(enable=True, partitions=2, replication_factor=1, config={"retention.ms": "90000"})
    verify_kafka(KafkaSettings(bootstrap_servers=stack.bootstrap, topic_creation=creation), "demo", PREFIX, [topic])
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 2
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == "90000"


def test_a_creation_the_principal_may_not_make_names_the_creation_settings(secured_kafka: Any) -> None:
    """It may describe the name (so the topic reads as missing, not forbidden) but not create it."""
    topic = f"test.access.uncreatable.{uuid.uuid4().hex[:10]}"
    principal = secured_kafka.principal("describer", [Grant("topic", topic, ("DESCRIBE",))])
    kafka = secured(principal, topic_creation=TopicCreationSettings(enable=True))
    with pytest.raises(ConfigError) as error:
        verify_kafka(kafka, "demo", PREFIX, {topic: "status.input_topic"})
    message = str(error.value)
    assert f"status.input_topic [env {PREFIX}STATUS__INPUT_TOPIC]: {topic}: " in message
    assert f"[env {PREFIX}KAFKA__TOPIC_CREATION__*]: cannot create topic {topic}" in message
