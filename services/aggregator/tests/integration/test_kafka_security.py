"""The job against a Kafka that wants SASL over TLS: Spark's Java client and the job's librdkafka
clients authenticate from the secret settings, a principal with only the grants the job needs
is enough, wrong credentials stop the job at start naming the setting, and the password shows
nowhere (Spark's plans, the job's log, /metrics)."""

from __future__ import annotations

import contextlib
import io
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from aggregator_reference import assert_aggregate_equal, by_window, expected_aggregates, reading
from confluent_kafka import Consumer, TopicPartition
from fluxgate_testing import ServiceProcess, free_port

from fluxgate_aggregator.job import read_framed
from fluxgate_aggregator.kafka_access import jaas_config
from fluxgate_aggregator.settings import AggregatorKafkaSettings, AggregatorSettings
from fluxgate_stack import SERVICE_GRANTS, Grant, renamed

pytestmark = [pytest.mark.integration, pytest.mark.spark]

AGGREGATOR = Path(sys.executable).with_name("fluxgate-aggregator")
BASE_MS = 1_767_225_600_000
S = 1_000
DEVICES = ("d1", "d2", "d3")
NASTY = "p\"a\\ss\nw;o}r d // /* x */ 'q' é\t$\r\""


def readings_between(first_s: int, last_s: int) -> list[dict[str, Any]]:
    return [
        reading(device, BASE_MS + t * S + 100 * n, 15.0 + n + (t % 7) * 0.25)
        for t in range(first_s, last_s)
        for n, device in enumerate(DEVICES)
    ]


def parsed_by_kafka(spark: Any, jaas: str) -> tuple[str, dict[str, str]]:
    """``jaas`` read by the Java client's own parser (kafka-clients, in the job's JVM)."""
    jvm = spark.sparkContext._jvm
    configs = jvm.java.util.HashMap()
    configs.put("sasl.jaas.config", jvm.org.apache.kafka.common.config.types.Password(jaas))
    (entry,) = list(jvm.org.apache.kafka.common.security.JaasContext.loadClientContext(configs).configurationEntries())
    options = entry.getOptions()
    return str(entry.getLoginModuleName()), {str(key): str(options.get(key)) for key in options.keySet()}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_the_java_client_reads_back_the_credentials_as_given(spark: Any, mechanism: str) -> None:
    module, options = parsed_by_kafka(spark, jaas_config(mechanism, 'us"er\\', NASTY))
    assert module.endswith("ScramLoginModule" if mechanism.startswith("SCRAM") else "PlainLoginModule")
    assert options == {"username": 'us"er\\', "password": NASTY}


# A long secret too (a token's length): Java's regex engine, which Spark's redaction runs, took
# one stack frame per character of an alternation in a loop, and overflowed the stack at about
# 5,000 characters, so that explain() failed with a StackOverflowError.
@pytest.mark.parametrize("password", ["Plan-Secret-42", "Plan-Secret-42" + "x" * 20_000])
def test_the_sources_plan_never_shows_the_password(spark: Any, stack: Any, password: str) -> None:
    settings = AggregatorSettings(
        kafka=AggregatorKafkaSettings(
            bootstrap_servers=stack.bootstrap,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username="aggregator",
            sasl_password=password,
            ssl_ca_location="/nonexistent/ca.pem",
        )
    )
    frames = read_framed(spark, settings)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        frames.explain(extended=True)
    plan = printed.getvalue()
    assert "kafka.sasl.jaas.config" in plan, "the options are in the plan: the test looks at the right thing"
    assert "Plan-Secret-42" not in plan


# The job as an operator runs it, against the SASL_SSL listener (its own process and JVM).


@pytest.fixture
def progress_group() -> str:
    return f"agg-progress-{uuid.uuid4().hex[:8]}"


def aggregator_grants(topics: Any, progress_group: str, without: str | None = None) -> tuple[Grant, ...]:
    """The stack's grants for the aggregator (READ on its input, WRITE on its outputs, its
    groups) on this test's topics and group; ``without`` one topic's."""
    names = {
        "sensors.readings": topics.input,
        "temperatures.aggregated": topics.output,
        "temperatures.late": topics.late,
        "sensors.deadletter": topics.deadletter,
        "fluxgate-aggregator": progress_group,
    }
    return tuple(grant for grant in renamed(SERVICE_GRANTS["aggregator"], names) if grant.name != without)


def secured_env(principal: Any, job_env: dict[str, str], progress_group: str) -> dict[str, str]:
    return {
        **job_env,
        **principal.kafka_env("FLUXGATE_AGG_"),
        "FLUXGATE_AGG_PROGRESS_GROUP": progress_group,
        # Every line the job logs, to look for the password in.
        "FLUXGATE_AGG_LOG__LEVEL": "DEBUG",
    }


def aggregator_process(env: dict[str, str], tmp_path: Path) -> ServiceProcess:
    port = free_port()
    return ServiceProcess(
        [str(AGGREGATOR), "run"],
        {**env, "FLUXGATE_AGG_HTTP__PORT": str(port)},
        health_port=port,
        log_path=tmp_path / "aggregator.log",
        isolate_prefix="FLUXGATE_AGG_",
    )


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """``group``'s committed offsets on ``topic`` (read on the lab's PLAINTEXT listener)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in offsets if tp.offset >= 0}
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "agg-security-test-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


def test_the_job_reads_and_writes_over_sasl_ssl_with_only_its_grants(
    secured_kafka: Any,
    stack: Any,
    topics: Any,
    devices: Any,
    read_aggregates: Any,
    progress_group: str,
    tmp_path: Path,
    job_env: dict[str, str],
) -> None:
    principal = secured_kafka.principal("aggregator", aggregator_grants(topics, progress_group))
    env = secured_env(principal, job_env, progress_group)
    # The devices write on the lab's listener; the job has nothing but its principal.
    sent = readings_between(0, 25)  # watermark -> 19.2 s: [0,10) closes for every device
    devices.send(sent)
    with aggregator_process(env, tmp_path) as job:
        job.start(timeout=180)
        want = {key: agg for key, agg in expected_aggregates(sent, 10 * S, 10 * S).items() if key[1] < BASE_MS + 10 * S}
        got = by_window(read_aggregates(topics.output, expected=len(want), timeout=180))
        assert set(got) == set(want)
        for key, emitted in got.items():
            for record in emitted:
                assert_aggregate_equal(record, want[key])

        # The progress group (the job's librdkafka consumer, same principal) has every reading.
        ends = end_offsets(stack.bootstrap, topics.input, 3)
        job.wait_until(
            lambda: committed(stack.bootstrap, progress_group, topics.input, 3) == {p: n for p, n in ends.items() if n},
            "the progress group commits every reading read",
            timeout=60,
        )
        metrics = job.metrics()
        assert "fluxgate_aggregator_watermark_seconds" in metrics
        assert job.terminate(timeout=60) == 0, job.log_tail()

    log_text = job.log_text()
    assert "aggregator.started" in log_text
    assert principal.password not in log_text, "the password is in the job's log"
    assert principal.password not in metrics, "the password is in /metrics"


def test_a_wrong_password_stops_the_job_at_start_naming_the_setting(
    secured_kafka: Any, stack: Any, topics: Any, progress_group: str, tmp_path: Path, job_env: dict[str, str]
) -> None:
    principal = secured_kafka.principal("aggregator", aggregator_grants(topics, progress_group))
    wrong = tmp_path / "wrong.password"
    wrong.write_text("Not-The-Password-7\n")
    env = secured_env(principal, job_env, progress_group)
    env["FLUXGATE_AGG_KAFKA__SASL_PASSWORD_FILE"] = str(wrong)
    with aggregator_process(env, tmp_path) as job:
        job.start(wait_ready=False)
        code = job.wait(timeout=60)
    log_text = job.log_text()
    assert code == 2, log_text[-3000:]
    assert "FLUXGATE_AGG_KAFKA__SASL_USERNAME" in log_text
    assert "FLUXGATE_AGG_KAFKA__SASL_PASSWORD_FILE" in log_text
    assert "Authentication failed" in log_text, log_text[-3000:]
    # Exit 2 naming the login settings is the refusal itself, said at once: waiting for Kafka
    # to answer would have ended in exit 1 naming the bootstrap servers (kafka_access._cluster).
    assert "SparkContext" not in log_text and "log4j" not in log_text, "it failed before starting Spark"
    assert "Not-The-Password-7" not in log_text


@pytest.mark.parametrize("missing", ["late topic", "progress group"])
def test_a_principal_without_a_grant_the_job_needs_stops_it_at_start_naming_what(
    secured_kafka: Any,
    stack: Any,
    topics: Any,
    progress_group: str,
    tmp_path: Path,
    missing: str,
    job_env: dict[str, str],
) -> None:
    without = topics.late if missing == "late topic" else progress_group
    principal = secured_kafka.principal("aggregator", aggregator_grants(topics, progress_group, without=without))
    env = secured_env(principal, job_env, progress_group)
    with aggregator_process(env, tmp_path) as job:
        job.start(wait_ready=False)
        code = job.wait(timeout=60)
    log_text = job.log_text()
    assert code == 2, log_text[-3000:]
    named = topics.late if missing == "late topic" else "FLUXGATE_AGG_PROGRESS_GROUP"
    assert named in log_text, log_text[-3000:]
    assert principal.username in log_text
    assert "SparkContext" not in log_text, "it failed before starting Spark"
    assert principal.password not in log_text
