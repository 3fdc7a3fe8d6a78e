"""coap-ingest against libcoap's real servers: dynamic resources, /time, restarts, DTLS-PSK."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from coap_payloads import T0, reading_json
from fluxgate_testing import consume

from fluxgate_core import deadletter
from fluxgate_core.consumed_record import ConsumedRecord

pytestmark = pytest.mark.integration


def body(device: str, value: float, timestamp: int) -> bytes:
    return reading_json(device, "temperature", value, timestamp)


def values(records: list[Any]) -> list[tuple[str, str, float]]:
    return sorted((r.record["device_id"], r.record["metric"], r.record["value"]) for r in records)


def test_dynamic_resources_and_the_time_resource(
    stack: Any,
    topics: tuple[str, str],
    read_readings: Callable[..., list[ConsumedRecord]],
    start_ingest: Callable[..., Any],
    libcoap: Callable[..., Any],
) -> None:
    _, dead_letter_topic = topics
    server = libcoap()
    base = f"coap://127.0.0.1:{server.port}"
    # libcoap's -d lets a PUT create a resource; such resources are observable and notify on PUT.
    server.put("/lc-1", body("lc-1", 20.25, T0))
    server.put("/lc-2/temperature", b"21.5")
    resources = [
        {"uri": f"{base}/lc-1"},
        {"uri": f"{base}/lc-2/temperature", "device_from": "path:0", "metric_from": "path:1"},
        # /time notifies every second with text like "Nov 22 18:59:03": not a number, so dead letters.
        {"uri": f"{base}/time", "device_id": "lc-clock", "metric": "clock", "payload_format": "number"},
    ]
    ingest = start_ingest(resources, READINESS="all")
    ingest.wait_ready()
    server.put("/lc-1", body("lc-1", 20.75, T0 + 1000))
    server.put("/lc-2/temperature", b"22")
    readings = read_readings(expected=4)
    dead = consume(stack.bootstrap, dead_letter_topic, expected=1, timeout=30, idle=0.5)
    assert ingest.terminate() == 0
    assert values(readings) == [
        ("lc-1", "temperature", 20.25),
        ("lc-1", "temperature", 20.75),
        ("lc-2", "temperature", 21.5),
        ("lc-2", "temperature", 22.0),
    ]
    assert {r.key for r in readings} == {b"lc-1", b"lc-2"}
    assert dead[0].header(deadletter.SOURCE) == f"{base}/time".encode()
    assert b"not valid JSON" in dead[0].header(deadletter.REASON)
    assert dead[0].key == b"lc-clock"


def test_observation_comes_back_after_the_server_restarts(
    read_readings: Callable[..., list[ConsumedRecord]], start_ingest: Callable[..., Any], libcoap: Callable[..., Any]
) -> None:
    server = libcoap()
    uri = f"coap://127.0.0.1:{server.port}/boiler"
    server.put("/boiler", body("boiler", 60.0, T0))
    # A restarted server forgets its observers and says nothing: silence is how we notice.
    ingest = start_ingest([{"uri": uri}], OBSERVE__MAX_AGE_S="1.5")
    ingest.wait_ready()
    assert len(read_readings(expected=1, idle=0.1)) == 1

    server.kill()
    ingest.wait_until(lambda: ingest.get("/readyz")[0] == 503, "the observation to be noticed lost")
    restarted = libcoap(port=server.port)
    restarted.put("/boiler", body("boiler", 61.0, T0 + 1000))  # the restarted server's first state
    ingest.wait_ready()
    restarted.put("/boiler", body("boiler", 62.0, T0 + 2000))
    # idle=3 s spans two silence re-registrations: their replays of the current state must not show.
    records = read_readings(expected=3, idle=3.0)
    assert [r.record["value"] for r in records] == [60.0, 61.0, 62.0]
    assert ingest.metric("fluxgate_coap_reregistrations_total", host="127.0.0.1", reason="silence") >= 1
    assert ingest.metric("fluxgate_coap_duplicates_dropped_total", host="127.0.0.1") >= 1
    assert ingest.terminate() == 0


def test_dtls_with_a_pre_shared_key(
    read_readings: Callable[..., list[ConsumedRecord]],
    start_ingest: Callable[..., Any],
    libcoap: Callable[..., Any],
    udp_pair: int,
) -> None:
    port = udp_pair
    # -p P serves plain CoAP on P and DTLS on P+1; PUT over plain CoAP, observe over DTLS.
    server = libcoap("coap-server-openssl", port=port, extra=("-k", "fluxgate-secret", "-h", "CoAP"))
    server.put("/secure", body("vault", 5.5, T0))
    resource = {"uri": f"coaps://127.0.0.1:{port + 1}/secure"}
    ingest = start_ingest([resource], DTLS__PSK_IDENTITY="gateway", DTLS__PSK_KEY="fluxgate-secret")
    ingest.wait_ready()
    server.put("/secure", body("vault", 6.5, T0 + 1000))
    records = read_readings(expected=2)
    assert ingest.terminate() == 0
    uri = resource["uri"]
    assert [(r.record["value"], r.record["source"]) for r in records] == [(5.5, uri), (6.5, uri)]


def test_wrong_pre_shared_key_never_becomes_ready(
    start_ingest: Callable[..., Any], libcoap: Callable[..., Any], udp_pair: int
) -> None:
    port = udp_pair
    server = libcoap("coap-server-openssl", port=port, extra=("-k", "fluxgate-secret", "-h", "CoAP"))
    server.put("/secure", body("vault", 5.5, T0))
    ingest = start_ingest(
        [{"uri": f"coaps://127.0.0.1:{port + 1}/secure"}], DTLS__PSK_IDENTITY="gateway", DTLS__PSK_KEY="wrong"
    )

    def failed_attempts() -> float:
        name = "fluxgate_coap_reregistrations_total"
        return sum(ingest.metric(name, host="127.0.0.1", reason=reason) for reason in ("error", "timeout"))

    ingest.wait_until(lambda: failed_attempts() >= 1, "the handshake to fail")
    assert ingest.get("/readyz")[0] == 503
    assert ingest.terminate() == 0


def test_coap_over_tcp(
    read_readings: Callable[..., list[ConsumedRecord]], start_ingest: Callable[..., Any], libcoap: Callable[..., Any]
) -> None:
    server = libcoap()  # -p opens the same port for CoAP over TCP (RFC 8323)
    server.put("/tcp-1", body("tcp-1", 30.5, T0))
    ingest = start_ingest([{"uri": f"coap+tcp://127.0.0.1:{server.port}/tcp-1"}])
    ingest.wait_ready()
    server.put("/tcp-1", body("tcp-1", 31.5, T0 + 1000))
    records = read_readings(expected=2)
    assert ingest.terminate() == 0
    assert [r.record["value"] for r in records] == [30.5, 31.5]
