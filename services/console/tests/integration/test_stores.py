"""The Stores card against the real Cassandra and Hazelcast of the stack: aggregates written
with the real clients into the test's own keyspace and table, ringbuffer, map and queue, then
read back through the console's JSON and its rendered page; a store away shows as its error
while the other still renders."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from cassandra.cluster import Cluster, Session
from console_process import Console, wait_for
from fluxgate_testing import free_port, unique_topic
from hazelcast.client import HazelcastClient
from hazelcast.core import HazelcastJsonValue

pytestmark = pytest.mark.integration


def aggregate(device: str, start: datetime, mean: float = 21.0) -> dict[str, Any]:
    return {"device_id": device, "metric": "temperature", "window_start": start,
            "window_end": start + timedelta(minutes=1), "count": 60, "mean": mean}  # fmt: skip


@pytest.fixture
def scylla_table(cassandra: tuple[str, int]) -> Iterator[tuple[Session, str]]:
    """The scylla-persister's table layout (AUTOCREATE's) in a keyspace of the test's own."""
    keyspace = f"console_{uuid.uuid4().hex[:10]}"
    cluster = Cluster([cassandra[0]], port=cassandra[1])
    session = cluster.connect()
    session.default_timeout = 30
    session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    session.execute(
        f"CREATE TABLE {keyspace}.aggregates (device_id text, metric text, day date, window_start timestamp,"
        " window_end timestamp, count bigint, mean double,"
        " PRIMARY KEY ((device_id, metric, day), window_start)) WITH CLUSTERING ORDER BY (window_start DESC)"
    )  # fmt: skip
    yield session, f"{keyspace}.aggregates"
    session.execute(f"DROP KEYSPACE {keyspace}")
    cluster.shutdown()


@pytest.fixture
def hz(hazelcast: tuple[str, str]) -> Iterator[HazelcastClient]:
    client = HazelcastClient(cluster_members=[hazelcast[0]], cluster_name=hazelcast[1])
    yield client
    client.shutdown()


def write_rows(session: Session, table: str, now: datetime) -> None:
    """Four rows of today (two partitions), two of yesterday (one) and one of ten days ago."""
    yesterday = now.date() - timedelta(days=1)
    columns = "device_id, metric, day, window_start, window_end, count, mean"
    insert = session.prepare(f"INSERT INTO {table} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?)")
    rows = [aggregate("dev-a", now - timedelta(seconds=s)) for s in range(1, 4)]  # today; the newest is dev-b's
    rows += [aggregate("dev-b", now, 23.5)]
    rows += [
        aggregate("dev-a", datetime.combine(yesterday, datetime.min.time(), UTC) + timedelta(hours=h)) for h in range(2)
    ]
    rows += [aggregate("dev-c", now - timedelta(days=10))]  # a series silent lately: not counted
    for r in rows:
        start = r["window_start"]
        session.execute(
            insert, (r["device_id"], r["metric"], start.date(), start, r["window_end"], r["count"], r["mean"])
        )


def as_json(doc: dict[str, Any]) -> HazelcastJsonValue:
    return HazelcastJsonValue(json.dumps({k: v.isoformat() if isinstance(v, datetime) else v for k, v in doc.items()}))


@pytest.fixture
def structures(hz: HazelcastClient, now: datetime) -> Iterator[tuple[str, str]]:
    """Aggregates in a ringbuffer, a map and a queue of the test's own: their prefix and the KCQL naming them."""
    prefix = f"console_{uuid.uuid4().hex[:8]}"
    yield prefix, write_structures(hz, prefix, now)
    for proxy in (hz.get_ringbuffer(f"{prefix}_ring"), hz.get_map(f"{prefix}_map"), hz.get_queue(f"{prefix}_queue")):
        proxy.blocking().destroy()


def write_structures(client: HazelcastClient, prefix: str, now: datetime) -> str:
    ring = client.get_ringbuffer(f"{prefix}_ring").blocking()
    ring.add_all([as_json(aggregate(f"dev-{i}", now - timedelta(minutes=5 - i))) for i in range(5)])
    imap = client.get_map(f"{prefix}_map").blocking()
    for i in range(3):
        imap.put(f"dev-m{i}|{i}", as_json(aggregate(f"dev-m{i}", now + timedelta(minutes=i), 30.0)))
    queue = client.get_queue(f"{prefix}_queue").blocking()
    queue.add(as_json(aggregate("dev-q", now - timedelta(hours=1))))
    source = "SELECT * FROM temperatures.aggregated"
    return "; ".join(f"INSERT INTO {prefix}_{name} {source} STOREAS {kind}"
                     for name, kind in (("ring", "RING_BUFFER"), ("map", "IMAP"), ("queue", "QUEUE")))  # fmt: skip


def stores_of(seen: Console) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in seen.get("/api/state")["stores"]}


def test_the_console_shows_what_scylla_and_hazelcast_hold_and_their_newest_aggregate(
    stack: Any, console: Callable[..., Console], cassandra: tuple[str, int], hazelcast: tuple[str, str],
    scylla_table: tuple[Session, str], structures: tuple[str, str], now: datetime,
) -> None:  # fmt: skip
    session, table = scylla_table
    write_rows(session, table, now)
    today, yesterday = now.date(), now.date() - timedelta(days=1)
    prefix, kcql = structures
    audit = unique_topic("console.replays", stack.bootstrap, partitions=1)
    seen = console([], [], audit, SCYLLA__CONTACT_POINTS=json.dumps([cassandra[0]]),
                   SCYLLA__PORT=str(cassandra[1]), SCYLLA__TABLE=table, SCYLLA__DAYS="2",
                   HAZELCAST__MEMBERS=json.dumps([hazelcast[0]]), HAZELCAST__CLUSTER_NAME=hazelcast[1],
                   HAZELCAST__KCQL=kcql)  # fmt: skip
    stores = wait_for(lambda: (s := stores_of(seen)) and all(x.get("holds") for x in s.values()) and s, 30,
                      "both stores answered")  # fmt: skip
    scylla, hazel = stores["scylla"], stores["hazelcast"]
    assert scylla["error"] is None and hazel["error"] is None
    assert [(h["name"], h["count"], h["detail"]) for h in scylla["holds"]] == [
        (today.isoformat(), 4, "2 of 3 partitions"),
        (yesterday.isoformat(), 2, "1 of 3 partitions"),
    ]
    assert (scylla["newest"]["device_id"], scylla["newest"]["mean"]) == ("dev-b", 23.5)
    assert scylla["newest"]["window_start"] == now.isoformat()
    sizes = {h["name"]: (h["kind"], h["count"]) for h in hazel["holds"]}
    assert sizes == {f"{prefix}_ring": ("ringbuffer", 5), f"{prefix}_map": ("map", 3),
                     f"{prefix}_queue": ("queue", 1)}  # fmt: skip
    ring = next(h for h in hazel["holds"] if h["kind"] == "ringbuffer")
    assert ring["detail"].startswith("capacity ") and "head 0 · tail 4" in ring["detail"]
    assert hazel["newest"]["device_id"] == "dev-m2"  # the map's latest window beats the ring's tail
    assert hazel["newest"]["seen_in"] == f"map {prefix}_map (latest window_start)"
    page = httpx.get(seen.url + "/", timeout=5).text
    card = page[page.index('id="stores"') :]
    assert f'data-held="{today.isoformat()}"' in card and "<b>4</b> rows" in card
    assert "newest aggregate: <b>dev-b</b>" in card and "newest aggregate: <b>dev-m2</b>" in card
    assert f'data-held="{prefix}_ring"' in card and "<b>5</b> items" in card


def test_scylla_away_is_its_error_and_hazelcast_still_renders(
    stack: Any, console: Callable[..., Console], hazelcast: tuple[str, str], structures: tuple[str, str]
) -> None:
    prefix, kcql = structures
    audit = unique_topic("console.replays", stack.bootstrap, partitions=1)
    seen = console([], [], audit, SCYLLA__CONTACT_POINTS='["127.0.0.1"]',
                   SCYLLA__PORT=str(free_port()), HAZELCAST__MEMBERS=json.dumps([hazelcast[0]]),
                   HAZELCAST__CLUSTER_NAME=hazelcast[1], HAZELCAST__KCQL=kcql)  # fmt: skip
    stores = wait_for(lambda: (s := stores_of(seen)) and s["scylla"]["error"] and s["hazelcast"]["holds"] and s,
                      30, "scylla's error beside hazelcast's figures")  # fmt: skip
    assert "NoHostAvailable" in stores["scylla"]["error"] and stores["scylla"]["at"] > 0
    page = httpx.get(seen.url + "/", timeout=5).text
    assert 'data-store="scylla" class="failed"' in page and f'data-held="{prefix}_ring"' in page
