"""topic_provisioning's decisions that need no Kafka: how an existing topic differs from what
was asked, what a topic's spec and the Job's settings accept, and the exits before any
connection (the Job against a real, secured Kafka: tests/deploy/test_topic_provisioning.py)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from fluxgate_core.lifecycle import EXIT_CONFIG
from fluxgate_core.settings import load_settings
from fluxgate_core.topic_provisioning import ProvisioningSettings, TopicSpec, mismatches, run

COMPACTED = {"cleanup.policy": "compact", "retention.ms": "604800000", "segment.bytes": "1073741824"}


def test_a_topic_as_asked_has_no_mismatch() -> None:
    spec = TopicSpec(partitions=3, replication_factor=2, config={"cleanup.policy": "compact"})
    assert mismatches(spec, 3, 2, COMPACTED) == []


@pytest.mark.parametrize(("partitions", "said"), [(1, "partitions 1, asked 3"), (6, "partitions 6, asked 3")])
def test_fewer_or_more_partitions_are_a_mismatch(partitions: int, said: str) -> None:
    assert mismatches(TopicSpec(partitions=3), partitions, 1, {}) == [said]


def test_the_brokers_default_replication_factor_accepts_any_count_of_replicas() -> None:
    assert mismatches(TopicSpec(partitions=3, replication_factor=-1), 3, 5, {}) == []
    assert mismatches(TopicSpec(partitions=3, replication_factor=3), 3, 1, {}) == ["replication factor 1, asked 3"]


def test_only_the_configs_asked_for_count_and_a_missing_one_is_said_as_none() -> None:
    spec = TopicSpec(partitions=3, config={"retention.ms": "86400000", "min.insync.replicas": "2"})
    assert mismatches(spec, 3, 1, COMPACTED) == [
        "min.insync.replicas=None, asked 2",
        "retention.ms=604800000, asked 86400000",
    ]


def test_every_difference_is_said_partitions_first_then_replicas_then_configs_by_name() -> None:
    spec = TopicSpec(partitions=4, replication_factor=3, config={"segment.bytes": "1", "cleanup.policy": "delete"})
    assert mismatches(spec, 2, 1, COMPACTED) == [
        "partitions 2, asked 4",
        "replication factor 1, asked 3",
        "cleanup.policy=compact, asked delete",
        "segment.bytes=1073741824, asked 1",
    ]


@pytest.mark.parametrize(
    "fields", [{"replication_factor": 0}, {"replication_factor": -2}, {"partitions": 0}, {"partition": 3}]
)
def test_a_spec_refuses_no_replicas_no_partitions_and_unknown_keys(fields: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        TopicSpec.model_validate(fields)


def test_the_topics_come_from_one_json_variable_each_filled_in_with_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topics = {"sensors.readings": {"partitions": 6}, "temperatures.late": {"config": {"retention.ms": "1"}}}
    monkeypatch.setenv("FLUXGATE_TOPICS_TOPICS", json.dumps(topics))
    settings = load_settings(ProvisioningSettings)
    assert settings.topics == {
        "sensors.readings": TopicSpec(partitions=6, replication_factor=-1, config={}),
        "temperatures.late": TopicSpec(partitions=3, replication_factor=-1, config={"retention.ms": "1"}),
    }


def test_a_bad_topic_stops_the_job_before_kafka_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No broker listens at the bootstrap address: the settings are refused before it is asked."""
    monkeypatch.setenv("FLUXGATE_TOPICS_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:1")
    monkeypatch.setenv("FLUXGATE_TOPICS_TOPICS", json.dumps({"t": {"replication_factor": 0}}))
    assert run([]) == EXIT_CONFIG
    assert "FLUXGATE_TOPICS_TOPICS" in capsys.readouterr().err


def test_arguments_are_refused_with_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--topics", "x"]) == EXIT_CONFIG
    assert "FLUXGATE_TOPICS_* variables" in capsys.readouterr().err
