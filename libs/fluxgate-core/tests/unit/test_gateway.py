"""The gateways' one start-up: schemas, then the producer fitted to every topic, then started."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from fluxgate_core import gateway
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.delivery import Outcome, classify
from fluxgate_core.errors import RegistryError
from fluxgate_core.limits import LimitSettings
from fluxgate_core.settings import KafkaSettings, RegistrySettings


class FakeProducer:
    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    async def start(self) -> None:
        self.steps.append("producer started")


async def test_schemas_first_then_batches_fitted_to_every_topic_then_the_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[str] = []

    def register(registry: RegistrySettings, topics: Any, schema_name: str) -> dict[str, Any]:
        steps.append(f"registered {schema_name} for {sorted(set(topics))}")
        return {topic: f"encoder of {topic}" for topic in sorted(set(topics))}

    def fit(config: dict[str, Any], topics: list[str]) -> dict[str, Any]:
        steps.append(f"fitted to {topics}")
        return {**config, "fitted": True}

    def make(config: dict[str, Any], max_in_flight: int) -> FakeProducer:
        assert config["fitted"] and config["client.id"] == "demo" and max_in_flight == 7
        return FakeProducer(steps)

    def verify(kafka: KafkaSettings, client_id: str, env_prefix: str, topics: dict[str, str]) -> None:
        steps.append(f"verified {client_id} ({env_prefix}) can reach {topics}")

    def verify_registry(registry: RegistrySettings, env_prefix: str) -> None:
        steps.append(f"verified the registry ({env_prefix})")

    monkeypatch.setattr(gateway, "verify_kafka", verify)
    monkeypatch.setattr(gateway, "verify_registry", verify_registry)
    monkeypatch.setattr(gateway, "register_readings", register)
    monkeypatch.setattr(gateway, "fit_batches_to_topics", fit)
    monkeypatch.setattr(gateway, "make_producer", make)
    monkeypatch.setattr(gateway, "TopicWatch", lambda kafka, service, topics: SimpleNamespace(start=lambda: topics))
    output = await gateway.open_gateway_output(
        "demo", KafkaSettings(), RegistrySettings(), ["b", "a", "b"], "dlq", 7, env_prefix="FX_", topics_setting="kcql"
    )
    assert steps == [
        "verified demo (FX_) can reach {'b': 'kcql', 'a': 'kcql', 'dlq': 'deadletter_topic'}",
        "verified the registry (FX_)",
        "registered sensor_reading for ['a', 'b']",
        "fitted to ['a', 'b', 'dlq']",
        "producer started",
    ]
    assert output.encoders == {"a": "encoder of a", "b": "encoder of b"}
    assert output.watch == {"b": "kcql", "a": "kcql", "dlq": "deadletter_topic"}  # every topic, watched

    writer = output.dead_letters(DeadLetterWriter, LimitSettings(max_payload_bytes=4096, deadletter_head_bytes=512))
    assert (writer.topic, writer._service, writer._max_whole_bytes, writer._head_bytes) == ("dlq", "demo", 4096, 512)


class RefusingRegistry:
    """A registry client that answers ``status`` to registering under any subject but ``ok-value``."""

    def __init__(self, status: int) -> None:
        self.status = status

    def set_compatibility(self, subject_name: str, level: str) -> None:
        return None

    def register_schema(self, subject: str, schema: Any) -> int:
        if subject == "ok-value":
            return 3
        raise SchemaRegistryError(self.status, self.status, f"no, {subject}")


@pytest.mark.parametrize("status", [409, 422, 400])
def test_a_subject_the_registry_refuses_is_that_targets_answer(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    monkeypatch.setattr(gateway, "registry_client", lambda settings: RefusingRegistry(status))
    answers = gateway.register_targets(RegistrySettings(), ["ok", "other", "ok"])
    assert answers["ok"].schema_id == 3  # type: ignore[union-attr]
    refusal = answers["other"]
    assert isinstance(refusal, gateway.SubjectRefused) and "'other-value'" in str(refusal)
    assert classify(refusal) is Outcome.REJECTED  # dead-lettered, never stopping the gateway


@pytest.mark.parametrize("status", [500, 503, 408, 429])
def test_a_registry_away_or_busy_still_raises(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    monkeypatch.setattr(gateway, "registry_client", lambda settings: RefusingRegistry(status))
    with pytest.raises(RegistryError) as caught:
        gateway.register_targets(RegistrySettings(), ["other"])
    assert caught.value.retriable


def test_a_target_whose_topic_is_not_there_is_refused_before_the_registry_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[list[str]] = []

    def unusable(kafka: KafkaSettings, service: str, topics: list[str], env_prefix: str) -> dict[str, str]:
        asked.append(topics)
        return {"gone": "gone: no such topic (...): create it with `kafka-topics.sh ...`"}

    monkeypatch.setattr(gateway, "registry_client", lambda settings: RefusingRegistry(409))
    monkeypatch.setattr(gateway, "unusable_topics", unusable)
    answers = gateway.register_targets(RegistrySettings(), ["ok", "gone"], kafka=KafkaSettings(), service="s")
    assert asked == [["gone", "ok"]]
    assert answers["ok"].schema_id == 3  # type: ignore[union-attr]
    refusal = answers["gone"]
    assert isinstance(refusal, gateway.SubjectRefused) and "kafka-topics.sh" in str(refusal)
    assert classify(refusal) is Outcome.REJECTED
