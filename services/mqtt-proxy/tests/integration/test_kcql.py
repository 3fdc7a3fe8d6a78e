"""mqtt-proxy started from Stream-Reactor MQTT source KCQL, against the real Mosquitto, Kafka and registry."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fluxgate_testing import consume

from fluxgate_core import deadletter
from fluxgate_core.kafka import ensure_topics
from fluxgate_core.serde import register

pytestmark = pytest.mark.integration
Setup = Any  # the `setup` fixture's type lives in conftest.py, which tests cannot import
JSON_SIMPLE = "com.datamountaineer.streamreactor.connect.converters.source.JsonSimpleConverter"


def test_two_statements_one_dollar_move_messages_to_their_topics_with_their_keys(setup: Setup) -> None:
    fixed, dynamic = f"{setup.prefix}/fixed/+", f"/{setup.prefix}/plant/#"
    # Stream-Reactor's rule for `$`: the first '/' dropped, every further one our separator ('.').
    line_1 = f"{setup.prefix}.plant.line-1"
    ensure_topics({"bootstrap.servers": setup.stack.bootstrap}, {line_1: 1}, replication=1)
    kcql = (
        f"INSERT INTO {setup.readings} SELECT * FROM {fixed} WITHKEY(sensorId, site) KEYDELIMITER='-' "
        f"WITHCONVERTER=`{JSON_SIMPLE}`;\n"
        f"INSERT INTO `$` SELECT * FROM {dynamic}"
    )
    proxy = setup.proxy(KCQL=kcql, KCQL_TOPIC_SEPARATOR=".").start()
    setup.publish(
        [
            (f"{setup.prefix}/fixed/a", json.dumps({"sensorId": "d1", "site": "north", "temperature": 20.5})),
            (f"{setup.prefix}/fixed/b", json.dumps({"sensorId": "d2", "site": "south", "temperature": 21.5})),
            (f"{setup.prefix}/fixed/b", "41.5"),  # JsonSimpleConverter: JSON, but no device and no metric
            (f"/{setup.prefix}/plant/line-1", json.dumps({"temperature": 30.25})),
            (f"/{setup.prefix}/plant/line-1", json.dumps({"sensorId": "p7", "humidity": 40})),
        ],
        1,
    )
    readings = setup.readings_in_kafka(expected=2)
    derived = consume(setup.stack.bootstrap, line_1, expected=2, decoder=setup.decoder, timeout=60)
    dead = consume(setup.stack.bootstrap, setup.deadletters, expected=1, timeout=30, idle=0.5)
    assert proxy.terminate() == 0

    assert sorted((r.key, r.record["device_id"], r.record["value"]) for r in readings) == [  # type: ignore[index]
        (b"d1-north", "d1", 20.5),
        (b"d2-south", "d2", 21.5),
    ]
    # Without a device field, the device (and so the key) is the MQTT topic, as Stream-Reactor keys by it.
    assert sorted((r.key, r.record["device_id"], r.record["metric"]) for r in derived) == [  # type: ignore[index]
        (f"/{setup.prefix}/plant/line-1".encode(), f"/{setup.prefix}/plant/line-1", "temperature"),
        (b"p7", "p7", "humidity"),
    ]
    assert [d.value for d in dead] == [b"41.5"]
    assert dead[0].header(deadletter.SOURCE) == f"{setup.prefix}/fixed/b".encode()


def test_kcql_that_does_not_parse_stops_the_start_naming_the_variable(setup: Setup) -> None:
    proxy = setup.proxy(KCQL="INSERT INTO t SELECT * FROM a/+ WITHCONVERTER=`x.Y`")
    assert proxy.start(wait_ready=False).wait(30) == 2
    log = proxy.log_text()
    assert "kcql [env FLUXGATE_MQTT_KCQL]" in log and "unknown converter 'x.Y'" in log


def test_a_subject_the_registry_refuses_or_a_topic_off_the_pattern_dead_letters_and_the_proxy_goes_on(
    setup: Setup, registry_client: Any
) -> None:
    refused, accepted = f"{setup.prefix}.agg.x", f"{setup.prefix}.line.y"
    ensure_topics({"bootstrap.servers": setup.stack.bootstrap}, {refused: 1, accepted: 1}, replication=1)
    # The subject holds another record type: Apicurio refuses SensorReading there (BACKWARD).
    other = '{"type":"record","name":"Aggregate","fields":[{"name":"count","type":"int"}]}'
    register(registry_client, f"{refused}-value", other, "BACKWARD")
    proxy = setup.proxy(
        KCQL=f"INSERT INTO $ SELECT * FROM /{setup.prefix}/#",
        KCQL_TOPIC_SEPARATOR=".",
        DERIVED_TOPICS__PATTERN=rf"{setup.prefix}\.(agg|line)\..+",
    ).start()
    reading = json.dumps({"sensorId": "d1", "temperature": 21.5})
    setup.publish([(f"/{setup.prefix}/agg/x", reading), (f"/{setup.prefix}/other/z", reading)], 1)
    dead = consume(setup.stack.bootstrap, setup.deadletters, expected=2, timeout=30)
    setup.publish([(f"/{setup.prefix}/line/y", reading)], 1)  # the proxy is still there
    (produced,) = consume(setup.stack.bootstrap, accepted, expected=1, decoder=setup.decoder, timeout=60)
    assert proxy.terminate() == 0

    why = {d.header(deadletter.SOURCE): (d.header(deadletter.ERROR_CLASS), d.header(deadletter.REASON)) for d in dead}
    refusal, off_pattern = why[f"/{setup.prefix}/agg/x".encode()], why[f"/{setup.prefix}/other/z".encode()]
    assert refusal[0] == b"SubjectRefused" and f"subject '{refused}-value'".encode() in (refusal[1] or b"")
    assert off_pattern[0] == b"InvalidReading" and b"does not match" in (off_pattern[1] or b"")
    assert produced.record["device_id"] == "d1"  # type: ignore[index]
