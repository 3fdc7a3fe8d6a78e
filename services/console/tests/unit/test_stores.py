"""The stores' views from recorded answers: Scylla's rows per recent day and newest row,
Hazelcast's structures and newest item, a store that does not answer, one that answers garbage."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

import httpx
import pytest
from console_recorded import NO_STORES, TEST_HOST, RecordedKafka, Services
from starlette.testclient import TestClient

from fluxgate_console.deadletters import DeadLetterBook
from fluxgate_console.hazelcast_store import Answer, ClientAnswers, Kind, hazelcast_view, structures
from fluxgate_console.refresh import Console
from fluxgate_console.scylla_store import Key, scylla_view
from fluxgate_console.settings import ConsoleSettings
from fluxgate_console.stores import BlockingStore, StoreView, elasticsearch
from fluxgate_console.web import Web

TODAY = date(2026, 11, 25)
PARTITION = ["device_id", "metric", "day"]


def row(device: str, day: date, minute: int) -> dict[str, Any]:
    start = datetime(day.year, day.month, day.day, 0, minute)  # the driver's naive UTC
    return {"device_id": device, "metric": "temperature", "day": day, "window_start": start, "mean": 21.5, "count": 60}


class RecordedScylla:
    """A table's rows by partition key, answered as the driver would (keys in token order)."""

    def __init__(self, rows: list[dict[str, Any]], partition: list[str] = PARTITION) -> None:
        self.partition, self.asked_keys = partition, 0
        self.rows: dict[Key, list[dict[str, Any]]] = {}
        for r in rows:
            self.rows.setdefault(tuple(r[c] for c in partition), []).append(r)

    def key_columns(self) -> tuple[list[str], str | None]:
        return self.partition, "window_start"

    def partition_keys(self, limit: int) -> list[Key]:
        self.asked_keys = limit
        return sorted(self.rows, key=repr)[:limit]

    def counts(self, keys: Sequence[Key]) -> list[int]:
        return [len(self.rows.get(k, [])) for k in keys]

    def newest(self, keys: Sequence[Key], event: str) -> list[dict[str, Any] | None]:
        return [max(self.rows[k], key=lambda r: r[event]) if k in self.rows else None for k in keys]


def test_scylla_counts_the_recent_days_of_every_series_and_finds_the_newest() -> None:
    yesterday, old = TODAY - timedelta(days=1), TODAY - timedelta(days=30)
    rows = [row("d1", TODAY, m) for m in range(5)] + [row("d2", TODAY, m) for m in range(3)]
    rows += [row("d1", yesterday, m) for m in range(7)] + [row("d3", old, m) for m in range(50)]
    view = scylla_view(RecordedScylla(rows), "fluxgate.t", 2, 100, TODAY)
    assert [(h.name, h.count, h.detail) for h in view.holds] == [
        ("2026-11-25", 8, "2 of 3 partitions"),  # d3 is a series too, silent today
        ("2026-11-24", 7, "1 of 3 partitions"),
    ]
    assert view.newest is not None
    assert (view.newest["device_id"], view.newest["window_start"]) == ("d1", "2026-11-25T00:04:00+00:00")
    assert "last 2 UTC day(s) of each (device_id, metric)" in view.meaning and "at least" not in view.meaning


def test_scylla_says_at_least_when_the_key_scan_is_cut() -> None:
    rows = [row(f"d{i}", TODAY, 0) for i in range(10)]
    answers = RecordedScylla(rows)
    view = scylla_view(answers, "fluxgate.t", 1, 4, TODAY)
    assert answers.asked_keys == 5  # one more than kept: that is how the cut is known
    assert view.holds[0].count == 4 and "limit reached: at least" in view.meaning


def test_scylla_table_without_a_day_counts_the_partitions_found() -> None:
    rows = [{**row("d1", TODAY, m), "day": None} for m in range(3)]
    view = scylla_view(RecordedScylla(rows, ["device_id", "metric"]), "ks.t", 2, 100, TODAY)
    assert [(h.name, h.count) for h in view.holds] == [("partitions found", 3)]


class RecordedHazelcast:
    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers

    def ask(self, kind: Kind, name: str) -> Answer:
        return self.answers[name]


def json_item(device: str, start: str) -> str:
    return f'{{"device_id": "{device}", "metric": "temperature", "window_start": "{start}", "mean": 20.0}}'


def test_hazelcast_sizes_each_structure_and_shows_the_newest_item() -> None:
    targets = structures(
        "INSERT INTO ring SELECT * FROM t STOREAS RING_BUFFER; INSERT INTO m SELECT * FROM t STOREAS IMAP;"
        " INSERT INTO q SELECT * FROM t STOREAS QUEUE"
    )
    assert targets == [("ringbuffer", "ring"), ("map", "m"), ("queue", "q")]
    view = hazelcast_view(RecordedHazelcast({
        "ring": Answer(41, "capacity 100000 · head 0 · tail 40", json_item("d1", "2026-11-25T10:00:00+00:00"), "tail"),
        "m": Answer(12, newest=json_item("d2", "2026-11-25T10:01:00+00:00"), newest_is="latest window_start"),
        "q": Answer(0),
    }), targets)  # fmt: skip
    assert [(h.name, h.kind, h.count) for h in view.holds] == [("ring", "ringbuffer", 41), ("m", "map", 12),
                                                                ("q", "queue", 0)]  # fmt: skip
    assert view.newest is not None and view.newest["device_id"] == "d2"
    assert view.newest["seen_in"] == "map m (latest window_start)"


def test_hazelcast_garbage_items_are_not_taken_for_aggregates() -> None:
    garbage = RecordedHazelcast({"ring": Answer(3, "", b"\x00\x00\x00\x00\x07avro"), "x": Answer(1, "", "{no")})
    view = hazelcast_view(garbage, [("ringbuffer", "ring"), ("queue", "x")])
    assert view.newest is None and view.error is None
    assert all("not JSON" in h.detail for h in view.holds)


async def test_a_store_that_does_not_answer_is_asked_once_and_reported_with_its_age() -> None:
    release, calls = threading.Event(), []

    def stuck() -> StoreView:
        calls.append(1)
        release.wait(5)
        return StoreView("scylla", 0.0)

    store = BlockingStore("scylla", stuck, 0.2)
    first = await store.view()
    second = await store.view()
    release.set()
    assert first.error == second.error == "no answer in 0.2s"
    assert second.at == first.at > 0 and len(calls) == 1  # the stuck ask is not doubled


async def test_an_answer_is_kept_for_every_s_and_an_error_is_asked_again() -> None:
    answers: list[StoreView | Exception] = [StoreView("scylla", 1.0), OSError("down"), StoreView("scylla", 3.0)]
    calls = []

    def ask() -> StoreView:
        calls.append(1)
        answer = answers[len(calls) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    kept = BlockingStore("scylla", ask, 1, every_s=3600)
    assert [(await kept.view()).at for _ in range(3)] == [1.0, 1.0, 1.0] and len(calls) == 1
    calls.clear()
    answers[:] = [OSError("down"), StoreView("scylla", 2.0), StoreView("scylla", 3.0)]
    again = BlockingStore("scylla", ask, 1, every_s=3600)
    seen = [await again.view() for _ in range(3)]
    assert seen[0].error == "OSError: down" and [v.at for v in seen[1:]] == [2.0, 2.0] and len(calls) == 2


async def test_without_every_s_each_refresh_asks() -> None:
    calls: list[int] = []

    def ask() -> StoreView:
        calls.append(1)
        return StoreView("hazelcast", float(len(calls)))

    store = BlockingStore("hazelcast", ask, 1)
    assert [(await store.view()).at for _ in range(3)] == [1.0, 2.0, 3.0]


async def test_a_store_that_raises_is_that_stores_error() -> None:
    def refused() -> StoreView:
        raise ConnectionRefusedError("127.0.0.1:9042")

    view = await BlockingStore("scylla", refused, 1).view()
    assert view.error == "ConnectionRefusedError: 127.0.0.1:9042" and view.holds == []


async def test_elasticsearch_answering_garbage_is_its_error() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>proxy login</html>"))
    async with httpx.AsyncClient(transport=transport) as client:
        view = await elasticsearch(client, ["http://es:9200"], "temperatures")
    assert view.error is not None and view.error.startswith("JSONDecodeError")


@pytest.fixture
def console(kafka: RecordedKafka, services: Services) -> Console:
    settings = ConsoleSettings.model_validate({"page_auth": {"mode": "none"}, "replay_auth": {"mode": "none"},
                                               **NO_STORES, **TEST_HOST})  # fmt: skip
    console = Console(settings, kafka, DeadLetterBook(settings.deadletters), client=services.client())
    rows = [row("d1", TODAY, m) for m in range(5)]

    def down() -> StoreView:
        raise OSError("hazelcast: no member answered")

    console._askers = [
        BlockingStore("scylla", lambda: scylla_view(RecordedScylla(rows), "fluxgate.t", 1, 100, TODAY), 1),
        BlockingStore("hazelcast", down, 1),
    ]
    return console


async def test_one_store_down_leaves_the_other_on_the_page_and_in_the_json(console: Console) -> None:
    await console.refresh()
    client = TestClient(Web(console, None, lambda: None).app())  # type: ignore[arg-type]
    stores = {s["name"]: s for s in client.get("/api/state").json()["stores"]}
    assert stores["scylla"]["holds"] == [{"name": "2026-11-25", "count": 5, "kind": "rows",
                                          "detail": "1 of 1 partitions"}]  # fmt: skip
    assert stores["scylla"]["newest"]["window_start"] == "2026-11-25T00:04:00+00:00"
    assert stores["hazelcast"]["error"] == "OSError: hazelcast: no member answered"
    page = client.get("/").text
    card = page[page.index('id="stores"') :]
    assert 'data-store="scylla"' in card and 'data-held="2026-11-25"' in card and "<b>5</b> rows" in card
    assert "window 2026-11-25T00:04:00+00:00" in card
    assert 'data-store="hazelcast" class="failed"' in card and "no member answered" in card


class BrokenClient:
    shut = 0

    def get_queue(self, name: str) -> Any:
        raise RuntimeError("Client is not active")

    def shutdown(self) -> None:
        self.shut += 1


def test_a_hazelcast_client_that_failed_is_replaced_on_the_next_ask() -> None:
    answers, broken = ClientAnswers({}), BrokenClient()
    answers._client = broken
    with pytest.raises(RuntimeError):
        answers.ask("queue", "q")
    assert broken.shut == 1 and answers._client is None  # the next ask connects afresh
