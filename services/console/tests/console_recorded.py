"""Recorded answers for the console's tests: each service's /readyz and /metrics as they answer, and Kafka's."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import httpx

from fluxgate_console.kafka_state import GroupAnswer, KafkaUnavailable, Member

RECORDED = Path(__file__).parent / "recorded"
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


class Services:
    """An httpx transport answering as the local services do: by port, a (status, readyz, metrics) or down."""

    def __init__(self) -> None:
        self.answers: dict[int, tuple[int, str, str] | None] = {}

    def handler(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers.get(request.url.port or 80)
        if answer is None:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
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
