"""create_topics returns once the broker lists what it created, against a fake admin client."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from fluxgate_core import kafka
from fluxgate_core.kafka import await_listed, create_topics


class LateMetadata:
    """Creates at once, but lists a created topic only from its ``late``-th listing on, as a
    KRaft broker learns of a topic a moment after the controller answered CreateTopics."""

    def __init__(self, late: int) -> None:
        self.late, self.listings, self.created = late, 0, set[str]()
        self.timeouts: list[float] = []

    def create_topics(self, new_topics: list[Any]) -> dict[str, Future[None]]:
        answers = {}
        for new in new_topics:
            self.created.add(new.topic)
            answers[new.topic] = answer = Future[None]()
            answer.set_result(None)
        return answers

    def list_topics(self, timeout: float = -1) -> Any:
        self.listings += 1
        self.timeouts.append(timeout)
        return SimpleNamespace(topics=dict.fromkeys(self.created if self.listings >= self.late else ()))


def test_a_created_topic_is_listed_by_the_broker_before_create_topics_returns() -> None:
    admin = LateMetadata(late=3)
    assert create_topics(admin, {"t": 1}) == ["t"]  # type: ignore[arg-type]
    assert admin.listings == 3


def test_nothing_created_asks_for_no_listing() -> None:
    admin = LateMetadata(late=1)
    assert create_topics(admin, {}) == []  # type: ignore[arg-type]
    assert admin.listings == 0


class Clock:
    """The wait's clock: only its own sleeps move it, so no stall of the machine counts."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_each_listing_gets_only_what_is_left_of_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka, "time", Clock())
    admin = LateMetadata(late=10**9)  # never listed: the wait runs out
    await_listed(admin, {"t"}, timeout=0.3)  # type: ignore[arg-type]
    assert admin.timeouts == pytest.approx([0.3, 0.25, 0.2, 0.15, 0.1, 0.1])  # at least 0.1 s each
