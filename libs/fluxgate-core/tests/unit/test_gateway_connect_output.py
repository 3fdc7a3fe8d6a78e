"""A gateway writing Kafka Connect's JSON or text: the registry is neither checked nor asked, at
start or for a target met at run time; Kafka still is, and a topic not there is still refused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fluxgate_core import gateway
from fluxgate_core.json_records import ConnectJsonEncoder, ConnectStringEncoder, OutputSettings
from fluxgate_core.settings import KafkaSettings, RegistrySettings


def no_registry(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the registry was contacted")


class Producer:
    async def start(self) -> None:
        return None


@pytest.mark.parametrize(("value_format", "kind"), [("json", ConnectJsonEncoder), ("string", ConnectStringEncoder)])
async def test_connect_formats_start_without_the_registry(
    monkeypatch: pytest.MonkeyPatch, value_format: Any, kind: type
) -> None:
    verified: list[dict[str, str]] = []
    monkeypatch.setattr(gateway, "verify_kafka", lambda kafka, service, prefix, topics: verified.append(topics))
    for name in ("verify_registry", "register_readings", "registry_client"):
        monkeypatch.setattr(gateway, name, no_registry)
    monkeypatch.setattr(gateway, "fit_batches_to_topics", lambda config, topics: config)
    monkeypatch.setattr(gateway, "make_producer", lambda config, max_in_flight: Producer())
    monkeypatch.setattr(gateway, "TopicWatch", lambda kafka, service, topics: SimpleNamespace(start=lambda: topics))
    output = await gateway.open_gateway_output(
        "demo", KafkaSettings(), RegistrySettings(), ["b", "a"], "dlq", 7, env_prefix="FX_",
        output=OutputSettings(value_format=value_format),
    )  # fmt: skip
    assert verified == [{"b": "", "a": "", "dlq": "deadletter_topic"}]
    assert sorted(output.encoders) == ["a", "b"] and all(isinstance(e, kind) for e in output.encoders.values())


def test_targets_met_at_run_time_need_no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway, "registry_client", no_registry)
    monkeypatch.setattr(gateway, "unusable_topics", lambda kafka, service, topics, prefix: {"gone": "gone: create it"})
    answers = gateway.register_targets(
        RegistrySettings(), ["ok", "gone"], kafka=KafkaSettings(), service="s",
        output=OutputSettings(value_format="json", value_schemas_enable=False),
    )  # fmt: skip
    assert isinstance(answers["ok"], ConnectJsonEncoder) and not answers["ok"].schemas_enable
    assert isinstance(answers["gone"], gateway.SubjectRefused) and "create it" in str(answers["gone"])
