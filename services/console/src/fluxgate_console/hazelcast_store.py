"""Hazelcast: the size of each structure the hazelcast-persister writes (its KCQL's targets and
``STOREAS``) and the newest aggregate each can show cheaply.

* ringbuffer: size, capacity, head and tail sequences; the newest is the tail item (one read).
* reliable topic: its backing ringbuffer (``_hz_rb_<name>``), the same way.
* queue: size; only the head is cheap to see (``peek``), the *oldest* waiting, and is labelled so.
* map: size; the newest by the event time through a ``max_by`` aggregation the members run
  (the values are JSON, so ``window_start`` is an ISO string that sorts as time does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from fluxgate_console.stores import Held, StoreView, plain
from fluxgate_sink.errors import KcqlError
from fluxgate_sink.kcql import parse

NAME = "hazelcast"
EVENT = "window_start"
Kind = Literal["ringbuffer", "reliable topic", "queue", "map"]
KINDS: dict[str, Kind] = {
    "RINGBUFFER": "ringbuffer",
    "QUEUE": "queue",
    "IMAP": "map",
    "MAP": "map",
    "RELIABLETOPIC": "reliable topic",
}
RELIABLE_TOPIC_RINGBUFFER = "_hz_rb_"  # the prefix Hazelcast names a reliable topic's ringbuffer with


@dataclass(frozen=True)
class Answer:
    """One structure's figures as Hazelcast gave them; ``newest`` is the raw stored value."""

    size: int
    detail: str = ""
    newest: Any = None
    newest_is: str = "newest"


class HazelcastAnswers(Protocol):
    """What the console asks Hazelcast: the client's (``ClientAnswers``) or a test's."""

    def ask(self, kind: Kind, name: str) -> Answer: ...


def structures(kcql: str) -> list[tuple[Kind, str]]:
    """(kind, name) of every target of the persister's KCQL; no STOREAS is a ringbuffer.
    Raises ValueError (what pydantic words with the setting's name) on a fault."""
    try:
        statements = parse(kcql)
    except KcqlError as exc:
        raise ValueError(str(exc)) from exc
    found = []
    for statement in statements:
        spelled = (statement.store_as or "RING_BUFFER").upper().replace("_", "")
        if spelled not in KINDS:
            raise ValueError(f"{statement.text}: STOREAS {statement.store_as} is not a Hazelcast structure")
        found.append((KINDS[spelled], statement.target))
    return found


def checked_kcql(kcql: str) -> str:
    """``kcql`` as it is, once :func:`structures` can read it."""
    structures(kcql)
    return kcql


def hazelcast_view(answers: HazelcastAnswers, targets: Sequence[tuple[Kind, str]]) -> StoreView:
    """Each structure's size and the newest aggregate any of them shows."""
    at = time.time()
    holds, candidates = [], []
    for kind, name in targets:
        answer = answers.ask(kind, name)
        document = decoded(answer.newest)
        note = "" if answer.newest is None or document else "; newest item is not JSON (WITHFORMAT AVRO?)"
        holds.append(Held(name, int(answer.size), kind, answer.detail + note))
        if document is not None:
            candidates.append({**document, "seen_in": f"{kind} {name} ({answer.newest_is})"})
    newest = max(candidates, key=lambda d: str(d.get(EVENT, ""))) if candidates else None
    meaning = "items per structure; newest: a ringbuffer's tail, a map's latest window_start, a queue's head"
    return StoreView(NAME, at, holds, plain(newest) if newest else None, meaning=meaning)


def decoded(value: Any) -> dict[str, Any] | None:
    """A stored JSON value as a dict; None for anything else (AVRO bytes, garbage)."""
    text = value.to_string() if hasattr(value, "to_string") else value
    if not isinstance(text, str):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


class ClientAnswers:
    """:class:`HazelcastAnswers` from the real cluster; connects on first use."""

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            from hazelcast.client import HazelcastClient  # heavy: imported only when Hazelcast is shown

            try:
                self._client = HazelcastClient(**self._options)
            except Exception as exc:  # the client's own words say neither where nor which cluster
                members, cluster = self._options.get("cluster_members"), self._options.get("cluster_name")
                raise ConnectionError(f"cluster {cluster!r} at {members}: {exc}") from exc
        return self._client

    def ask(self, kind: Kind, name: str) -> Answer:
        try:
            return self._ask(kind, name)
        except Exception:
            # A client that lost the cluster for longer than its connect timeout shuts itself
            # down for good: start afresh on the next refresh rather than fail forever.
            self.close()
            raise

    def _ask(self, kind: Kind, name: str) -> Answer:
        if kind == "queue":
            queue = self.client().get_queue(name).blocking()
            return Answer(queue.size(), newest=queue.peek(), newest_is="oldest waiting")
        if kind == "map":
            from hazelcast.aggregator import max_by

            imap = self.client().get_map(name).blocking()
            size = imap.size()
            entry = imap.aggregate(max_by(EVENT)) if size else None
            return Answer(size, newest=entry.value if entry is not None else None, newest_is=f"latest {EVENT}")
        ring_name = RELIABLE_TOPIC_RINGBUFFER + name if kind == "reliable topic" else name
        ring = self.client().get_ringbuffer(ring_name).blocking()
        size, capacity, head, tail = ring.size(), ring.capacity(), ring.head_sequence(), ring.tail_sequence()
        newest = ring.read_one(tail) if size and tail >= head else None
        return Answer(size, f"capacity {capacity} · head {head} · tail {tail}", newest, "tail")

    def close(self) -> None:
        if self._client is not None:
            self._client.shutdown()
            self._client = None
