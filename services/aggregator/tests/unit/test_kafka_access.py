"""How the job reaches a secured Kafka: Spark's Java client gets its credentials from the secret
settings (never from a plain one), the job's librdkafka clients get them from ``client_config``,
and wrong credentials stop the job at start, naming the setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from fluxgate_aggregator import kafka_access, losses, offsets
from fluxgate_aggregator.job import kafka_options
from fluxgate_aggregator.kafka_access import jaas_config, verify_kafka
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
    monkeypatch.setattr(offsets, "Consumer", FakeConsumer)
    monkeypatch.setattr(losses, "Consumer", FakeConsumer)
    settings = secured()
    offsets.ProgressCommitter(settings).close()
    losses.KafkaWatermarks(settings).close()
    assert len(FakeConsumer.configs) == 2
    for config in FakeConsumer.configs:
        assert config["security.protocol"] == "SASL_SSL"
        assert (config["sasl.mechanism"], config["sasl.username"]) == ("SCRAM-SHA-512", "aggregator")
        assert config["sasl.password"] == "s3cret"
        assert config["ssl.ca.location"] == "/etc/kafka/ca.pem"
    assert FakeConsumer.configs[0]["group.id"] == "fluxgate-aggregator"


# verify_kafka: the check at start.


class FakeAdmin:
    """An AdminClient whose brokers answer with ``errors`` through error_cb (served on poll)."""

    def __init__(self, errors: list[KafkaError], *, reachable: bool = True) -> None:
        self.errors = errors
        self.reachable = reachable
        self.config: dict[str, Any] = {}

    def __call__(self, config: dict[str, Any]) -> FakeAdmin:
        self.config = config
        return self

    def poll(self, timeout: float) -> int:
        for error in self.errors:
            self.config["error_cb"](error)
        return len(self.errors)

    def list_topics(self, timeout: float) -> Any:
        from confluent_kafka import KafkaException

        if self.errors or not self.reachable:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))
        return object()


def verify(admin: FakeAdmin, settings: AggregatorSettings, timeout_s: float = 2.0) -> None:
    verify_kafka(settings.kafka, "FLUXGATE_AGG_", timeout_s=timeout_s, admin_client=admin)


def test_credentials_kafka_refuses_stop_the_job_naming_the_settings(tmp_path: Path) -> None:
    refused = KafkaError(
        KafkaError._AUTHENTICATION,
        "sasl_ssl://kafka-1:9094/bootstrap: SASL authentication error: Authentication failed during authentication "
        "due to invalid credentials with SASL mechanism SCRAM-SHA-512",
    )
    with pytest.raises(ConfigError) as error:
        verify(FakeAdmin([refused]), secured())
    message = str(error.value)
    assert "FLUXGATE_AGG_KAFKA__SASL_USERNAME" in message
    assert "FLUXGATE_AGG_KAFKA__SASL_PASSWORD" in message
    assert "invalid credentials" in message
    assert "s3cret" not in message

    secret = tmp_path / "password"
    secret.write_text("s3cret")
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_KAFKA__SASL_PASSWORD_FILE"):
        verify(FakeAdmin([refused]), secured(sasl_password=None, sasl_password_file=secret))


def test_a_mechanism_the_broker_does_not_offer_names_the_mechanism() -> None:
    refused = KafkaError(
        KafkaError._AUTHENTICATION,
        "SASL SCRAM-SHA-512 mechanism handshake failed: Broker: Unsupported SASL mechanism: "
        "broker's supported mechanisms: SCRAM-SHA-256",
    )
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_KAFKA__SASL_MECHANISM"):
        verify(FakeAdmin([refused]), secured())


def test_a_certificate_the_ca_does_not_verify_names_the_ca() -> None:
    failed = KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed")
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_KAFKA__SSL_CA_LOCATION"):
        verify(FakeAdmin([failed]), secured())


def test_the_check_authenticates_as_the_job_does() -> None:
    admin = FakeAdmin([])
    verify(admin, secured())
    assert admin.config["sasl.username"] == "aggregator"
    assert admin.config["sasl.password"] == "s3cret"
    assert admin.config["security.protocol"] == "SASL_SSL"


def test_kafka_away_is_not_a_configuration_error() -> None:
    # Kafka not answering yet is what the job's supervisor and Spark's retries are for.
    verify(FakeAdmin([], reachable=False), secured(), timeout_s=0.3)


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
    monkeypatch.setattr(app, "registry_client", later("registry_client"))
    monkeypatch.setattr(app, "build_session", later("build_session"))
    with pytest.raises(ConfigError, match="FLUXGATE_AGG_KAFKA__SASL_PASSWORD"):
        app.AggregatorJob(secured()).serve(threading.Event())
    assert reached == ["verify_kafka"]
    assert kafka_access.verify_kafka is verify_kafka


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
