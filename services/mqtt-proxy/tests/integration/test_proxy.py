"""mqtt-proxy against real Mosquitto, Kafka and schema registry."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from fluxgate_testing import consume

from fluxgate_stack import kill, restart, start

Setup = Any  # the `setup` fixture's type lives in conftest.py, which tests cannot import


def reading(device: str, seq: int, value: float) -> str:
    return json.dumps({"sensorId": device, "timestamp": int(time.time() * 1000), "temperature": value, "seq": seq})


pytestmark = pytest.mark.integration


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_each_qos_arrives_in_kafka_with_exact_values(setup: Setup, qos: int) -> None:
    setup.proxy().start()
    values = {seq: round(18 + seq * 0.37, 2) for seq in range(40)}
    setup.publish([(f"{setup.prefix}/dev-{seq % 4}/temperature", reading(f"dev-{seq % 4}", seq, v))
                   for seq, v in values.items()], qos)  # fmt: skip
    got = setup.readings_in_kafka(expected=len(values))
    assert sorted((r.record["sequence"], r.record["value"]) for r in got) == sorted(values.items())  # type: ignore[index]
    for item in got:
        assert item.record is not None
        assert item.key == item.record["device_id"].encode()
        assert (item.record["metric"], item.record["unit"], item.record["source_protocol"]) == (
            "temperature",
            "Cel",
            "MQTT",
        )
        assert item.record["source"] == f"{setup.prefix}/{item.record['device_id']}/temperature"


def test_mqtt_311_and_mqtt5_user_properties(setup: Setup) -> None:
    setup.proxy(**{"MQTT__PROTOCOL_VERSION": "4"}).start()
    setup.publish([(f"{setup.prefix}/d1/humidity", "55.5")], 1, "-V", "311")
    v5 = setup.proxy(**{"MQTT__PROTOCOL_VERSION": "5"})
    setup.proxies[0].signal(signal.SIGTERM)
    v5.start()
    setup.publish(
        [(f"{setup.prefix}/d2/humidity", "44.25")], 1, "-V", "5", "-D", "publish", "user-property", "site", "lab"
    )
    got = {r.record["device_id"]: r for r in setup.readings_in_kafka(expected=2)}  # type: ignore[index]
    assert got["d1"].record["value"] == 55.5 and got["d2"].record["value"] == 44.25  # type: ignore[index]
    assert got["d2"].header("mqtt.user.site") == b"lab"
    assert got["d2"].record["attributes"] == {"site": "lab"}  # type: ignore[index]


def test_a_device_cannot_set_where_a_replay_of_its_dead_letter_writes(setup: Setup) -> None:
    setup.proxy().start()
    forged = ("-D", "publish", "user-property", "fluxgate.dlq.topic", "temperatures.aggregated")
    setup.publish([(f"{setup.prefix}/d1/temperature", "{not json")], 1, "-V", "5", *forged)
    (letter,) = consume(setup.stack.bootstrap, setup.deadletters, expected=1, timeout=30)
    assert letter.header("fluxgate.dlq.topic") is None  # the console would replay into it
    assert letter.header("mqtt.user.fluxgate.dlq.topic") == b"temperatures.aggregated"
    assert letter.header("fluxgate.dlq.source") == f"{setup.prefix}/d1/temperature".encode()


def test_malformed_payloads_go_to_the_dead_letter_topic_and_the_proxy_keeps_going(setup: Setup) -> None:
    proxy = setup.proxy().start()
    bad = ["{not json", '{"sensorId":"d1","temperature":"warm"}', "NaN"]
    setup.publish([(f"{setup.prefix}/d1/temperature", payload) for payload in bad], 1)
    setup.publish([(f"{setup.prefix}/d1/temperature", "21.0")], 1)
    dead = consume(setup.stack.bootstrap, setup.deadletters, expected=3, timeout=30)
    assert sorted(d.value for d in dead) == sorted(p.encode() for p in bad)
    for letter in dead:
        assert letter.header("fluxgate.dlq.service") == b"mqtt-proxy"
        assert letter.header("fluxgate.dlq.source") == f"{setup.prefix}/d1/temperature".encode()
        assert letter.header("fluxgate.dlq.error.class") in {b"PayloadError", b"InvalidReading"}
        assert letter.header("fluxgate.dlq.reason")
    assert [r.record["value"] for r in setup.readings_in_kafka(expected=1)] == [21.0]  # type: ignore[index]
    assert proxy.process is not None and proxy.process.poll() is None


def test_two_replicas_on_a_shared_subscription_split_the_load(setup: Setup) -> None:
    group = {"MQTT__SHARE_GROUP": "replicas"}
    first, second = setup.proxy(**group).start(), setup.proxy(**group).start()
    count = 300
    setup.publish(
        [(f"{setup.prefix}/d{seq % 10}/temperature", reading(f"d{seq % 10}", seq, seq)) for seq in range(count)], 1
    )
    got = setup.readings_in_kafka(expected=count)
    seqs = collections.Counter(r.record["sequence"] for r in got)  # type: ignore[index]
    assert sorted(seqs) == list(range(count)), "lost"
    assert max(seqs.values()) == 1, "doubled"
    shares = [proxy.metric("fluxgate_mqtt_messages_total") for proxy in (first, second)]
    assert sum(shares) == count and min(shares) > 0, shares


def test_killed_mid_stream_at_qos1_and_restarted_loses_nothing(setup: Setup) -> None:
    client_id = f"kill-{setup.prefix}"
    proxy = setup.proxy(client_id, QOS="1").start()
    count = 2000
    messages = [(f"{setup.prefix}/d{seq % 5}/temperature", reading(f"d{seq % 5}", seq, seq)) for seq in range(count)]
    publisher = threading.Thread(target=setup.publish, args=(messages, 1))
    publisher.start()
    deadline = time.monotonic() + 30
    while (seen := proxy.metric("fluxgate_mqtt_messages_total")) < count // 10 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proxy.signal(signal.SIGKILL) == -signal.SIGKILL
    assert count // 10 <= seen < count, f"not killed mid-stream: {seen} of {count} received"
    publisher.join(timeout=60)  # the rest is queued in the persistent session meanwhile
    setup.proxy(client_id, QOS="1").start()
    seqs = setup.sequences_in_kafka(set(range(count)))
    assert set(seqs) == set(range(count)), f"lost {sorted(set(range(count)) - set(seqs))[:20]}"
    print(f"redelivered duplicates after SIGKILL: {sum(seqs.values()) - count}")


@pytest.mark.serial(kills="mosquitto")
def test_broker_restart_then_the_proxy_resumes(setup: Setup) -> None:
    proxy = setup.proxy(QOS="1").start()
    setup.publish([(f"{setup.prefix}/d1/temperature", reading("d1", 1, 1.5))], 1)
    restart("mosquitto")
    proxy.wait_ready(timeout=30)
    setup.publish([(f"{setup.prefix}/d1/temperature", reading("d1", 2, 2.5))], 1)
    # At least once: a restart between Kafka's ack and the PUBACK redelivers, so sequence 1 may come twice.
    assert set(setup.sequences_in_kafka({1, 2}, timeout=60)) == {1, 2}
    assert proxy.metric("fluxgate_mqtt_disconnects_total") >= 1


@pytest.mark.serial(kills="kafka")
def test_kafka_down_stops_acknowledging_stays_bounded_and_loses_nothing(setup: Setup) -> None:
    bound, receive_maximum = 50, 100
    proxy = setup.proxy(QOS="1", MAX_PENDING_MESSAGES=str(bound), MQTT__RECEIVE_MAXIMUM=str(receive_maximum)).start()
    setup.publish([(f"{setup.prefix}/d0/temperature", reading("d0", 0, 0.5))], 1)
    assert len(setup.readings_in_kafka(expected=1)) == 1
    acknowledged = proxy.metric("fluxgate_mqtt_acknowledged_total")
    count = 1000
    kill("kafka")
    try:
        # The broker takes these (its PUBACK is to mosquitto_pub) and queues them in the proxy's session.
        setup.publish(
            [
                (f"{setup.prefix}/d{seq % 5}/temperature", reading(f"d{seq % 5}", seq, seq))
                for seq in range(1, count + 1)
            ],
            1,
        )
        proxy.wait_until(lambda: proxy.get("/readyz")[0] == 503, "/readyz to report Kafka down")
        proxy.wait_until(lambda: proxy.metric("fluxgate_mqtt_read_pauses_total") >= 1, "reading to pause")
        peak = 0.0
        for _ in range(30):  # watch it for a few seconds: bounded, nothing acknowledged
            peak = max(peak, proxy.metric("fluxgate_mqtt_pending_messages"))
            assert proxy.get("/readyz")[0] == 503
            time.sleep(0.1)
        assert proxy.metric("fluxgate_mqtt_acknowledged_total") == acknowledged
        assert 0 < peak <= receive_maximum, peak
        assert not proxy.exited
    finally:
        start("kafka")
    proxy.wait_ready(timeout=60)
    seqs = setup.sequences_in_kafka(set(range(count + 1)), timeout=120)
    assert set(seqs) == set(range(count + 1)), f"lost {sorted(set(range(count + 1)) - set(seqs))[:20]}"
    print(f"peak pending {peak} (bound {bound}); duplicates after the outage: {sum(seqs.values()) - count - 1}")


def test_sigterm_drains_in_flight_messages_and_exits_zero(setup: Setup) -> None:
    # A long linger keeps the records in the producer: SIGTERM lands with all of them in flight.
    proxy = setup.proxy(QOS="1", KAFKA__LINGER_MS="5000").start()
    setup.publish([(f"{setup.prefix}/d1/temperature", reading("d1", seq, seq)) for seq in range(50)], 1)
    proxy.wait_until(lambda: proxy.metric("fluxgate_mqtt_messages_total") == 50, "all 50 messages in hand")
    in_flight = 50 - proxy.metric("fluxgate_mqtt_acknowledged_total")
    assert proxy.signal(signal.SIGTERM) == 0
    assert in_flight > 0, "nothing was in flight: this test proved nothing"
    assert sorted(setup.sequences_in_kafka(set(range(50)), timeout=30).elements()) == list(range(50))


def test_bad_configuration_fails_at_start_naming_the_variable() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fluxgate_mqtt_proxy"], env={"FLUXGATE_MQTT_MQTT__PORT": "eighty"},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "FLUXGATE_MQTT_MQTT__PORT" in result.stderr
