"""verify_kafka's decision on a missing topic, against a fake admin client: said at start with the
setting and the command that creates it, or created when ``kafka.topic_creation`` asks."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from fluxgate_core import topic_access
from fluxgate_core.errors import ConfigError, DeliveryError
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.settings import KafkaSettings, TopicCreationSettings
from fluxgate_core.topic_access import create_command, unusable_topics
from fluxgate_core.topic_watch import TopicWatch

PREFIX = "FLUXGATE_COAP_"


class FakeAdmin:
    """Knows ``existing`` topics; ``forbidden`` ones answer an authorization error when asked by name;
    ``create_topics`` records what it was asked and answers ``refusal`` (a KafkaError) or success."""

    def __init__(self, existing: set[str], forbidden: set[str] = frozenset(), refusal: KafkaError | None = None):
        self.existing, self.forbidden, self.refusal = set(existing), forbidden, refusal
        self.created: list[Any] = []

    def __call__(self, config: dict[str, Any]) -> FakeAdmin:
        assert config["allow.auto.create.topics"] is False
        return self

    def poll(self, timeout: float) -> int:
        return 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        if topic is None:
            return SimpleNamespace(topics=dict.fromkeys(self.existing - self.forbidden))
        code = KafkaError.TOPIC_AUTHORIZATION_FAILED if topic in self.forbidden else KafkaError.UNKNOWN_TOPIC_OR_PART
        return SimpleNamespace(topics={topic: SimpleNamespace(error=KafkaError(code))})

    def create_topics(self, new_topics: list[Any]) -> dict[str, Future[None]]:
        answers = {}
        for new in new_topics:
            self.created.append(new)
            answer: Future[None] = Future()
            if self.refusal is not None:
                answer.set_exception(KafkaException(self.refusal))
            else:
                answer.set_result(None)
                self.existing.add(new.topic)
            answers[new.topic] = answer
        return answers


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin({"sensors.deadletter"})
    monkeypatch.setattr(topic_access, "AdminClient", fake)
    return fake


TOPICS = {"coap_sensor_topic": "kcql", "sensors.deadletter": "deadletter_topic"}


def test_a_missing_topic_stops_the_start_naming_it_its_setting_and_the_command(admin: FakeAdmin) -> None:
    with pytest.raises(ConfigError) as caught:
        verify_kafka(KafkaSettings(), "coap-ingest", PREFIX, TOPICS)
    message = str(caught.value)
    assert "kcql [env FLUXGATE_COAP_KCQL]: coap_sensor_topic: no such topic" in message
    command = "kafka-topics.sh --bootstrap-server 127.0.0.1:9092 --create --topic coap_sensor_topic --partitions 3"
    assert f"`{command}`" in message
    assert "FLUXGATE_COAP_KAFKA__TOPIC_CREATION__ENABLE=true" in message
    assert "sensors.deadletter" not in message
    assert admin.created == []


def test_asked_to_create_it_creates_the_missing_topics_as_the_settings_say(admin: FakeAdmin) -> None:
    creation = TopicCreationSettings(enable=True, partitions=6, replication_factor=1, config={"retention.ms": "60000"})
    verify_kafka(KafkaSettings(topic_creation=creation), "coap-ingest", PREFIX, [*TOPICS, "other"])
    created = {new.topic: new for new in admin.created}
    assert sorted(created) == ["coap_sensor_topic", "other"]
    assert all((n.num_partitions, n.replication_factor) == (6, 1) for n in created.values())
    assert all(dict(n.config) == {"retention.ms": "60000"} for n in created.values())


def test_a_topic_the_principal_may_not_use_is_never_created(admin: FakeAdmin) -> None:
    admin.forbidden = {"coap_sensor_topic"}
    admin.existing.add("coap_sensor_topic")
    with pytest.raises(ConfigError, match="coap_sensor_topic: this client may not use it"):
        verify_kafka(KafkaSettings(topic_creation=TopicCreationSettings(enable=True)), "c", PREFIX, TOPICS)
    assert admin.created == []


def test_a_refused_creation_names_the_creation_settings(admin: FakeAdmin) -> None:
    admin.refusal = KafkaError(KafkaError.INVALID_REPLICATION_FACTOR, "Replication factor: 3 larger than brokers: 1")
    kafka = KafkaSettings(topic_creation=TopicCreationSettings(enable=True, replication_factor=3))
    with pytest.raises(ConfigError, match=r"FLUXGATE_COAP_KAFKA__TOPIC_CREATION__\*\]: cannot create topic .*larger"):
        verify_kafka(kafka, "coap-ingest", PREFIX, TOPICS)


def test_a_creation_that_timed_out_is_no_configuration_error(admin: FakeAdmin) -> None:
    admin.refusal = KafkaError(KafkaError.REQUEST_TIMED_OUT, "timed out", retriable=True)
    kafka = KafkaSettings(topic_creation=TopicCreationSettings(enable=True))
    with pytest.raises(DeliveryError) as caught:
        verify_kafka(kafka, "coap-ingest", PREFIX, TOPICS)
    assert not isinstance(caught.value, ConfigError)


def test_the_command_carries_the_replication_the_config_and_a_login() -> None:
    creation = TopicCreationSettings(partitions=1, replication_factor=2, config={"cleanup.policy": "compact"})
    login: dict[str, Any] = {"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p"}
    kafka = KafkaSettings(bootstrap_servers="k:9093", security_protocol="SASL_SSL", topic_creation=creation, **login)
    assert create_command("t", kafka) == (
        "kafka-topics.sh --bootstrap-server k:9093 --create --topic t --partitions 1 --replication-factor 2 "
        "--config cleanup.policy=compact --command-config <client properties with this service's login>"
    )


@pytest.mark.parametrize("setting", ["partitions", "replication_factor"])
def test_zero_partitions_or_replicas_are_refused(setting: str) -> None:
    with pytest.raises(ValueError, match="at least 1, or -1"):
        TopicCreationSettings.model_validate({setting: 0})


def test_the_brokers_defaults_leave_the_counts_out_of_the_command() -> None:
    kafka = KafkaSettings(topic_creation=TopicCreationSettings(partitions=-1))
    assert create_command("t", kafka) == "kafka-topics.sh --bootstrap-server 127.0.0.1:9092 --create --topic t"


def test_a_watched_topic_deleted_while_running_is_said_once_and_unreadies_until_it_is_back(
    admin: FakeAdmin, capsys: pytest.CaptureFixture[str]
) -> None:
    admin.existing.add("coap_sensor_topic")
    watch = TopicWatch(KafkaSettings(), "coap-ingest", TOPICS)
    watch.check()
    assert watch.present()
    admin.existing.discard("coap_sensor_topic")
    watch.check()
    watch.check()
    assert not watch.present() and watch.missing == {"coap_sensor_topic"}
    said = capsys.readouterr().out
    assert said.count("kafka.topic.missing") == 1 and "setting=kcql" in said
    admin.existing.add("coap_sensor_topic")
    watch.check()
    assert watch.present() and "kafka.topic.back" in capsys.readouterr().out


def test_a_cluster_that_does_not_answer_says_nothing_about_the_topics(admin: FakeAdmin) -> None:
    def away(**_: Any) -> Any:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "down"))

    watch = TopicWatch(KafkaSettings(), "coap-ingest", TOPICS)
    admin.list_topics = away  # type: ignore[method-assign]
    watch.check()
    assert watch.present()


def test_a_topic_met_while_running_is_created_or_its_problem_named(admin: FakeAdmin) -> None:
    problems = unusable_topics(KafkaSettings(), "mqtt-proxy", ["plant.line-1", "sensors.deadletter"], "FLUXGATE_MQTT_")
    assert list(problems) == ["plant.line-1"]
    said = problems["plant.line-1"]
    assert said.startswith("plant.line-1: no such topic") and "--topic plant.line-1" in said
    creation = KafkaSettings(topic_creation=TopicCreationSettings(enable=True))
    assert unusable_topics(creation, "mqtt-proxy", ["plant.line-1"], "FLUXGATE_MQTT_") == {}
    assert [new.topic for new in admin.created] == ["plant.line-1"]
    admin.refusal = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not authorized")
    refused = unusable_topics(creation, "mqtt-proxy", ["plant.line-2"], "FLUXGATE_MQTT_")
    assert "FLUXGATE_MQTT_KAFKA__TOPIC_CREATION__*]: cannot create topic plant.line-2" in refused["plant.line-2"]
