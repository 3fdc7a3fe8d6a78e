"""Servers that need another: `up` brings the required one too, in registry order."""

from __future__ import annotations

from fluxgate_stack import servers
from fluxgate_stack.servers.registry import RegistryServer
from fluxgate_stack.settings import StackSettings


def test_the_registry_requires_kafka_which_starts_first() -> None:
    assert RegistryServer.requires == ("kafka",)
    names = servers.with_requirements(["registry"])
    assert names == ["registry", "kafka"]
    assert [server.name for server in servers.build(names, StackSettings())] == ["kafka", "registry"]


def test_nothing_asked_stays_nothing_asked() -> None:
    assert servers.with_requirements(None) is None
    assert servers.with_requirements([]) == []
    assert servers.with_requirements(["kafka", "mosquitto"]) == ["kafka", "mosquitto"]


def test_the_registry_keeps_its_schemas_in_the_journal_topic() -> None:
    settings = StackSettings(kafka_port=19092, registry_journal_topic="journal")
    command = " ".join(RegistryServer(settings).command())
    for flag in (
        "-Dapicurio.storage.kind=kafkasql",
        "-Dapicurio.kafkasql.bootstrap.servers=127.0.0.1:19092",
        "-Dapicurio.kafkasql.topic=journal",
        "-Dapicurio.kafkasql.topic.retention.ms=-1",
    ):
        assert flag in command, flag
