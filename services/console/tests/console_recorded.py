"""Recorded answers for the console's tests: each service's /readyz and /metrics as they answer, and Kafka's."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import httpx

from fluxgate_console.deadletters import DeadLetter
from fluxgate_console.kafka_state import GroupAnswer, KafkaUnavailable, Member
from fluxgate_core.deadletter import dead_letter_headers

RECORDED = Path(__file__).parent / "recorded"
# Settings that show no store asked through a driver: unit tests ask no server.
TEST_HOST = {"web": {"allowed_hosts": ["testserver"]}}  # the Host of Starlette's TestClient
NO_STORES = {"elasticsearch": {"hosts": []}, "scylla": {"contact_points": []}, "hazelcast": {"members": []}}
READY = json.dumps({"ready": True, "checks": {"ready": True}})
NOT_READY = json.dumps({"ready": False, "checks": {"ready": False}})
TRANSPORT_FAILURE = (
    "cannot list topics: KafkaError{code=_TRANSPORT,val=-195,"
    'str="Failed to get metadata: Local: Broker transport failure"}'
)


def metrics_text(name: str) -> str:
    return (RECORDED / "metrics" / f"{name}.txt").read_text()


def recorded_connect(name: str) -> object:
    return json.loads((RECORDED / "connect" / f"{name}.json").read_text())


def refused(request: httpx.Request) -> httpx.ConnectError:
    """A closed port as httpx really reports it: anyio's "All connection attempts failed"
    on top, the socket's ECONNREFUSED at the bottom of the chain."""
    failed = OSError("All connection attempts failed")
    failed.__cause__ = ConnectionRefusedError(111, f"Connect call failed {(request.url.host, request.url.port)}")
    refusal = httpx.ConnectError(str(failed), request=request)
    refusal.__cause__ = failed
    return refusal


class Services:
    """An httpx transport answering as the local services do: by port, a (status, readyz, metrics) or down."""

    def __init__(self) -> None:
        self.answers: dict[int, tuple[int, str, str] | None] = {}

    def handler(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers.get(request.url.port or 80)
        if answer is None:
            raise refused(request)
        status, ready, metrics = answer
        if request.url.path == "/readyz":
            return httpx.Response(status, text=ready)
        return httpx.Response(200, text=metrics)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler), timeout=1)


class RecordedKafka:
    """KafkaAnswers from fixed ends and groups; a group missing from ``groups`` raises."""

    def __init__(self, ends: dict[str, dict[int, int]], groups: Mapping[str, GroupAnswer], down: bool = False) -> None:
        self.ends, self.groups, self.down = ends, dict(groups), down

    def end_offsets(self, topics: Iterable[str]) -> dict[str, dict[int, int]]:
        if self.down:
            raise KafkaUnavailable(TRANSPORT_FAILURE)
        return {t: dict(self.ends[t]) for t in topics if t in self.ends}

    def group(self, group: str) -> GroupAnswer:
        if group not in self.groups:
            raise KafkaUnavailable(f"cannot describe group {group}: KafkaError{{code=_TIMED_OUT}}")
        return self.groups[group]


def group_answer(topic: str, committed: Mapping[int, int], members: int = 1) -> GroupAnswer:
    parts = tuple((topic, p) for p in committed)
    crew = tuple(Member(f"client-{i}", f"/127.0.0.{i + 1}", parts[i::members]) for i in range(members))
    return GroupAnswer("STABLE", crew, {(topic, p): o for p, o in committed.items()})


def gateway_letter(offset: int, payload: bytes = b'{"temp": "warm"}', at_ms: int = 1_700_000_000_000) -> DeadLetter:
    """A dead letter as a gateway writes it (fluxgate_core.deadletter), from an MQTT topic."""
    headers = dead_letter_headers(
        reason="value 'warm' is not a number", error_class="PayloadError", source="sensors/dev-7/temperature",
        service="mqtt-proxy", now_ms=at_ms,
    )  # fmt: skip
    return DeadLetter("sensors.deadletter", 0, offset, at_ms, b"dev-7", payload, (("mqtt.qos", b"1"), *headers))


def aggregator_letter(offset: int, source_offset: int, at_ms: int = 1_700_000_060_000) -> DeadLetter:
    """A dead letter as the aggregator writes it: its source is ``<topic>/<partition>/<offset>``."""
    headers = dead_letter_headers(
        reason="unknown schema id 42: not registered when the job started", error_class="SerializationError",
        source=f"sensors.readings/1/{source_offset}", service="aggregator", now_ms=at_ms,
    )  # fmt: skip
    return DeadLetter("sensors.deadletter", 1, offset, at_ms, b"dev-3", b"\x00\x00\x00\x00\x2a\x0cdev-3", headers)


def sink_letter(offset: int, at_ms: int = 1_700_000_120_000) -> DeadLetter:
    """A dead letter as the sink runtime writes it: where it was read from in its own headers."""
    headers = [
        ("fluxgate.dlq.topic", b"temperatures.aggregated"), ("fluxgate.dlq.partition", b"2"),
        ("fluxgate.dlq.offset", b"77"), ("fluxgate.dlq.target", b"temperatures-2024.01.01"),
        *dead_letter_headers(
            reason="BulkIndexError: 1 document(s) failed. Caused by: mapper_parsing_exception: failed to parse [mean]",
            error_class="StoreRejected", source="temperatures.aggregated", service="es-persister", now_ms=at_ms,
        ),
    ]  # fmt: skip
    return DeadLetter("persisters.deadletter", 0, offset, at_ms, b"dev-1", b"\x00\x00\x00\x00\x07body", headers)


def forged_letter(offset: int, forged: bytes = b"temperatures.aggregated") -> DeadLetter:
    """A gateway's dead letter whose device sent an MQTT 5 user property named like the sink
    runtime's source-topic header: the gateway copied it, verbatim, among the originals."""
    letter = gateway_letter(offset, payload=b"\xde\xad not an aggregate")
    return DeadLetter(letter.topic, letter.partition, offset, letter.timestamp_ms, letter.key, letter.value,
                      (("fluxgate.dlq.topic", forged), *letter.headers))  # fmt: skip
