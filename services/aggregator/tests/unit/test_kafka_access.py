"""How the job reaches a secured Kafka: Spark's Java client gets its credentials from the secret
settings (never from a plain one), the job's librdkafka clients get them from ``client_config``,
and Kafka's refusals stop the job at start, naming the setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from pydantic import ValidationError

from fluxgate_aggregator import losses, progress_commits
from fluxgate_aggregator.job import kafka_options, kafka_sink_options
from fluxgate_aggregator.kafka_access import jaas_config, verify_group
from fluxgate_aggregator.settings import AggregatorKafkaSettings, AggregatorSettings
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import KafkaSettings, load_settings

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def secured(**overrides: Any) -> AggregatorSettings:
    kafka: dict[str, Any] = {
        "bootstrap_servers": "kafka-1:9094",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "aggregator",
        "sasl_password": "s3cret",
        "ssl_ca_location": "/etc/kafka/ca.pem",
    }
    return AggregatorSettings(kafka=AggregatorKafkaSettings(**{**kafka, **overrides}))


def test_sparks_java_client_gets_the_credentials_from_the_secret_settings() -> None:
    options = kafka_options(secured())
    assert options == {
        "kafka.bootstrap.servers": "kafka-1:9094",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": f'{SCRAM} required username="aggregator" password="s3cret";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
    }


def test_plain_uses_the_plain_login_module() -> None:
    options = kafka_options(secured(sasl_mechanism="PLAIN", security_protocol="SASL_PLAINTEXT", ssl_ca_location=None))
    assert options["kafka.sasl.jaas.config"] == f'{PLAIN} required username="aggregator" password="s3cret";'
    assert "kafka.ssl.truststore.location" not in options, "no TLS, no truststore"


def test_the_password_file_is_read_each_time_the_options_are_built(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("first\n")
    settings = secured(sasl_password=None, sasl_password_file=secret)
    assert 'password="first";' in kafka_options(settings)["kafka.sasl.jaas.config"]
    secret.write_text("rotated")
    assert 'password="rotated";' in kafka_options(settings)["kafka.sasl.jaas.config"]


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ('with"quote', r'"with\"quote"'),
        ("back\\slash", r'"back\\slash"'),
        ('ends with \\"', r'"ends with \\\""'),
        ("two\nlines\r", r'"two\nlines\r"'),
        ("semi;colon } // /* */ 'single' é", "\"semi;colon } // /* */ 'single' é\""),
    ],
)
def test_jaas_values_are_quoted_as_kafkas_parser_reads_them(value: str, quoted: str) -> None:
    # Kafka's JaasConfig reads a quoted value with java.io.StreamTokenizer: backslash escapes
    # (\\, \", \n, \r), and a raw line break would end the value (checked against the real
    # parser in tests/integration/test_kafka_security.py).
    assert jaas_config("SCRAM-SHA-256", value, value) == f"{SCRAM} required username={quoted} password={quoted};"


def test_ssl_without_sasl_gets_the_truststore_only() -> None:
    options = kafka_options(
        secured(security_protocol="SSL", sasl_mechanism=None, sasl_username=None, sasl_password=None)
    )
    assert options == {
        "kafka.bootstrap.servers": "kafka-1:9094",
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/kafka/ca.pem",
    }


def test_plaintext_is_what_it_was() -> None:
    assert kafka_options(AggregatorSettings()) == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }


def test_extra_is_librdkafkas_and_java_extra_sparks() -> None:
    settings = secured(
        extra={"socket.keepalive.enable": "true"}, java_extra={"ssl.endpoint.identification.algorithm": ""}
    )
    options = kafka_options(settings)
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert "kafka.socket.keepalive.enable" not in options, "librdkafka's names are not the Java client's"
    consumer = settings.kafka.consumer_config("g", "c")
    assert consumer["socket.keepalive.enable"] == "true"
    assert "ssl.endpoint.identification.algorithm" not in consumer


@pytest.mark.parametrize(
    "key", ["sasl.jaas.config", "ssl.truststore.password", "ssl.key.password", "ssl.keystore.key", "some.secret"]
)
def test_a_secret_never_goes_in_java_extra(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    monkeypatch.setenv("FLUXGATE_AGG_KAFKA__JAVA_EXTRA", f'{{"{key}": "x"}}')
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_KAFKA__JAVA_EXTRA") as error:
        load_settings(AggregatorSettings)
    assert "sasl_password" in str(error.value)


@pytest.mark.parametrize(
    ("key", "setting"),
    [
        ("bootstrap.servers", "BOOTSTRAP_SERVERS"),
        ("security.protocol", "SECURITY_PROTOCOL"),
        ("sasl.mechanism", "SASL_MECHANISM"),
        ("ssl.truststore.location", "SSL_CA_LOCATION"),
    ],
)
def test_java_extra_does_not_override_a_setting(monkeypatch: pytest.MonkeyPatch, key: str, setting: str) -> None:
    monkeypatch.setenv("FLUXGATE_AGG_KAFKA__SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("FLUXGATE_AGG_KAFKA__SSL_CA_LOCATION", "/ca.pem")
    monkeypatch.setenv("FLUXGATE_AGG_KAFKA__JAVA_EXTRA", f'{{"{key}": "x"}}')
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_KAFKA__JAVA_EXTRA") as error:
        load_settings(AggregatorSettings)
    assert f"FLUXGATE_AGG_KAFKA__{setting}" in str(error.value)


def test_a_java_truststore_of_its_own_when_no_ca_is_set() -> None:
    settings = secured(
        ssl_ca_location=None, java_extra={"ssl.truststore.location": "/jks", "ssl.truststore.type": "JKS"}
    )
    options = kafka_options(settings)
    assert (options["kafka.ssl.truststore.location"], options["kafka.ssl.truststore.type"]) == ("/jks", "JKS")


def test_the_java_credentials_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-a-secret\n")
    for name, value in {
        "SECURITY_PROTOCOL": "SASL_SSL",
        "SASL_MECHANISM": "SCRAM-SHA-256",
        "SASL_USERNAME": "agg",
        "SASL_PASSWORD_FILE": str(secret),
        "SSL_CA_LOCATION": "/ca.pem",
    }.items():
        monkeypatch.setenv(f"FLUXGATE_AGG_KAFKA__{name}", value)
    options = kafka_options(load_settings(AggregatorSettings))
    assert options["kafka.sasl.jaas.config"] == f'{SCRAM} required username="agg" password="from-a-secret";'


def test_a_plain_kafka_settings_instance_is_taken_as_the_aggregators() -> None:
    # The benchmark and the tests build the job's settings with fluxgate_core's KafkaSettings.
    settings = AggregatorSettings(kafka=KafkaSettings(bootstrap_servers="k:1", extra={"a.b": "c"}))
    assert isinstance(settings.kafka, AggregatorKafkaSettings)
    kafka = settings.kafka
    assert (kafka.bootstrap_servers, kafka.extra, kafka.java_extra) == ("k:1", {"a.b": "c"}, {})


def test_the_options_never_show_the_password_in_the_settings_repr() -> None:
    settings = secured()
    assert "s3cret" not in repr(settings)
    assert "s3cret" not in str(settings.model_dump())


# The job's librdkafka clients: the progress group's committer and the watermark reader.


class FakeConsumer:
    configs: list[dict[str, Any]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        FakeConsumer.configs.append(config)

    def close(self) -> None:
        return


def test_the_progress_committer_and_the_watermark_reader_authenticate(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeConsumer.configs = []
    monkeypatch.setattr(progress_commits, "Consumer", FakeConsumer)
    monkeypatch.setattr(losses, "Consumer", FakeConsumer)
    settings = secured()
    progress_commits.ProgressCommitter(settings).close()
    losses.KafkaWatermarks(settings).close()
    assert len(FakeConsumer.configs) == 2
    for config in FakeConsumer.configs:
        assert config["security.protocol"] == "SASL_SSL"
        assert (config["sasl.mechanism"], config["sasl.username"]) == ("SCRAM-SHA-512", "aggregator")
        assert config["sasl.password"] == "s3cret"
        assert config["ssl.ca.location"] == "/etc/kafka/ca.pem"
    assert FakeConsumer.configs[0]["group.id"] == "fluxgate-aggregator"


# The checks at start: fluxgate_core's verify_kafka (login, CA, topics), then the progress group.


class FakeFuture:
    def __init__(self, error: KafkaError | None) -> None:
        self.error = error

    def result(self) -> Any:
        if self.error is not None:
            raise KafkaException(self.error)
        return object()


class FakeAdmin:
    """An AdminClient whose group description fails with ``error`` (None: succeeds)."""

    def __init__(self, error: KafkaError | None) -> None:
        self.error = error
        self.config: dict[str, Any] = {}

    def __call__(self, config: dict[str, Any]) -> FakeAdmin:
        self.config = config
        return self

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> dict[str, FakeFuture]:
        return {group: FakeFuture(self.error) for group in groups}


def test_a_progress_group_the_principal_may_not_use_stops_the_job_naming_it() -> None:
    admin = FakeAdmin(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "Group authorization failed"))
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_PROGRESS_GROUP") as error:
        verify_group(secured().kafka, "FLUXGATE_AGG_", "fluxgate-aggregator", admin_client=admin)
    assert "aggregator" in str(error.value) and "s3cret" not in str(error.value)
    assert (admin.config["sasl.username"], admin.config["sasl.password"]) == ("aggregator", "s3cret")


@pytest.mark.parametrize("error", [None, KafkaError(KafkaError._TIMED_OUT, "timed out")])
def test_a_group_kafka_lets_it_use_or_does_not_answer_for_is_no_configuration_error(error: KafkaError | None) -> None:
    verify_group(secured().kafka, "FLUXGATE_AGG_", "fluxgate-aggregator", admin_client=FakeAdmin(error))


def test_the_job_checks_its_credentials_before_the_registry_and_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from fluxgate_aggregator import app

    reached: list[str] = []

    def refused(*args: Any, **kwargs: Any) -> None:
        reached.append("verify_kafka")
        raise ConfigError("kafka.sasl_password [env FLUXGATE_AGG_KAFKA__SASL_PASSWORD]: refused")

    def later(name: str) -> Any:
        def called(*args: Any, **kwargs: Any) -> None:
            reached.append(name)
            raise AssertionError(f"{name} before the credentials were checked")

        return called

    monkeypatch.setattr(app, "verify_kafka", refused)
    monkeypatch.setattr(app, "verify_group", later("verify_group"))
    monkeypatch.setattr(app, "registry_client", later("registry_client"))
    monkeypatch.setattr(app, "build_session", later("build_session"))
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_KAFKA__SASL_PASSWORD"):
        app.AggregatorJob(secured()).serve(threading.Event())
    assert reached == ["verify_kafka"]


def test_the_job_checks_every_topic_it_reads_and_writes() -> None:
    from fluxgate_aggregator.app import job_topics

    both = ["sensors.readings", "temperatures.aggregated", "sensors.deadletter"]
    assert job_topics(secured()) == [*both, "temperatures.late"]
    assert job_topics(AggregatorSettings(late_topic="")) == both, "no late topic: only counted"


@pytest.mark.parametrize("password", ["plain", 'q"uo\\"te', "line\nbreak", "ends with \\", "x" * 300])
def test_the_string_redaction_hides_the_whole_password_even_cut_short(password: str) -> None:
    # What spark.sql.redaction.string.regex (spark.py) makes of a plan string holding the JAAS value.
    import re

    from fluxgate_aggregator.spark import REDACT_JAAS

    jaas = jaas_config("SCRAM-SHA-512", "agg", password)
    for shown in (jaas, jaas[: len(jaas) // 2 + 60]):
        redacted = re.sub(REDACT_JAAS, "*********(redacted)", shown)
        assert "password=" not in redacted
        assert all(part not in redacted for part in password.split() if len(part) > 3), redacted


def test_the_sink_batches_and_compresses_as_the_settings_say_and_the_source_is_not_told() -> None:
    # Given to nothing before: the job's one producer is Spark's sink, which ran Java's defaults.
    settings = AggregatorSettings.model_validate({"kafka": {"linger_ms": 20, "compression_type": "zstd"}})
    sink = kafka_sink_options(settings)
    assert sink == {**kafka_options(settings), "kafka.linger.ms": "20", "kafka.compression.type": "zstd"}
    assert kafka_sink_options(AggregatorSettings())["kafka.compression.type"] == "lz4"
    assert not {"kafka.linger.ms", "kafka.compression.type"} & set(kafka_options(settings))


@pytest.mark.parametrize("key", ["linger.ms", "compression.type"])
def test_java_extra_may_not_set_what_a_setting_gives_the_sink(key: str) -> None:
    with pytest.raises(ValidationError, match=f"java_extra: {key} \\(set FLUXGATE_AGG_KAFKA__"):
        AggregatorSettings.model_validate({"kafka": {"java_extra": {key: "1"}}})


def test_a_librdkafka_producer_bound_is_refused_naming_where_the_sinks_goes() -> None:
    with pytest.raises(ValidationError, match=r"max_buffered_messages: .*buffer\.memory"):
        AggregatorSettings.model_validate({"kafka": {"max_buffered_messages": 5}})
