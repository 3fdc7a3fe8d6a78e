"""Kafka Connect's ``topic.creation.*`` keys of a source config as the gateway's
``KAFKA__TOPIC_CREATION__*``: created as Kafka Connect would, refused where it would fail."""

from __future__ import annotations

import json

import pytest
from connect_fixtures import FIXTURES, load_env

from fluxgate_connect.config import load
from fluxgate_connect.errors import ConnectError
from fluxgate_connect.translate import translate

# KIP-158's example keys, as Kafka's documentation gives them for a source connector.
CREATION = {
    "topic.creation.default.replication.factor": "1",
    "topic.creation.default.partitions": "5",
    "topic.creation.default.cleanup.policy": "compact",
    "topic.creation.default.retention.ms": "604800000",
}


def coap_source(**keys: str) -> dict[str, str]:
    return {**load(FIXTURES / "coap-source.properties", {}), **keys}


def test_the_default_group_becomes_the_gateways_topic_creation(monkeypatch: pytest.MonkeyPatch) -> None:
    result = translate(coap_source(**CREATION))
    env = {name: value for name, value in result.env.items() if "TOPIC_CREATION" in name}
    assert env == {
        "FLUXGATE_COAP_KAFKA__TOPIC_CREATION__ENABLE": "true",
        "FLUXGATE_COAP_KAFKA__TOPIC_CREATION__PARTITIONS": "5",
        "FLUXGATE_COAP_KAFKA__TOPIC_CREATION__REPLICATION_FACTOR": "1",
        "FLUXGATE_COAP_KAFKA__TOPIC_CREATION__CONFIG": json.dumps(
            {"cleanup.policy": "compact", "retention.ms": "604800000"}
        ),
    }
    assert not result.warnings
    creation = load_env(result.connector.settings, result.env, monkeypatch).kafka.topic_creation
    assert (creation.enable, creation.partitions, creation.replication_factor) == (True, 5, 1)
    assert creation.config == {"cleanup.policy": "compact", "retention.ms": "604800000"}


def test_without_the_keys_nothing_is_created() -> None:
    assert not any("TOPIC_CREATION" in name for name in translate(coap_source()).env)
    assert not any("TOPIC_CREATION" in name for name in translate(coap_source(**{"topic.creation.enable": "true"})).env)


def test_the_workers_switch_off_creates_nothing() -> None:
    result = translate(coap_source(**CREATION, **{"topic.creation.enable": "false"}))
    assert {name: value for name, value in result.env.items() if "TOPIC_CREATION" in name} == {
        "FLUXGATE_COAP_KAFKA__TOPIC_CREATION__ENABLE": "false"
    }


def test_brokers_defaults_are_minus_one() -> None:
    keys = {"topic.creation.default.partitions": "-1", "topic.creation.default.replication.factor": "-1"}
    env = translate(coap_source(**keys)).env
    assert env["FLUXGATE_COAP_KAFKA__TOPIC_CREATION__PARTITIONS"] == "-1"
    assert env["FLUXGATE_COAP_KAFKA__TOPIC_CREATION__REPLICATION_FACTOR"] == "-1"


def test_what_kafka_connect_would_refuse_is_refused_all_at_once() -> None:
    keys = {
        "topic.creation.default.partitions": "0",
        "topic.creation.groups": "compacted",
        "topic.creation.compacted.include": "status.*",
    }
    with pytest.raises(ConnectError) as caught:
        translate(coap_source(**keys))
    message = str(caught.value)
    assert "topic.creation.default.partitions=0: at least 1, or -1" in message
    assert "topic.creation.default.replication.factor: required with topic.creation.* keys" in message
    assert "topic.creation.groups: not supported: one creation setting for every topic" in message
    assert "topic.creation.compacted.include: not supported" in message


def test_the_mqtt_source_maps_them_too() -> None:
    mqtt = load(FIXTURES / "mqtt-source.properties", {})
    env = translate({**mqtt, **CREATION}).env
    assert env["FLUXGATE_MQTT_KAFKA__TOPIC_CREATION__PARTITIONS"] == "5"


def test_a_sink_creates_no_topics_and_says_the_keys_are_unknown() -> None:
    sink = load(FIXTURES / "hazelcast-sink.properties", {})
    result = translate({**sink, **CREATION})
    assert not any("TOPIC_CREATION" in name for name in result.env)
    assert any(warning.startswith("topic.creation.default.partitions: not a key") for warning in result.warnings)
