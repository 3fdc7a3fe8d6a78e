"""The stores' live counts against the real Cassandra: the Scylla table counted one slice of
the token ring at a time (``RingCount``) equals ``SELECT count(*)``, is whole after one turn
when each call may count only one slice, never goes down as the table grows, and reads 0 for
a table that does not exist yet."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.cluster import Cluster, Session
from cassandra.concurrent import execute_concurrent_with_args
from pipeline_stores import RingCount, Stores, partition_key

pytestmark = pytest.mark.integration

KEYSPACE = "fluxgate_tools_tests"


@pytest.fixture(scope="module")
def session(cassandra: tuple[str, int]) -> Iterator[Session]:
    cluster = Cluster([cassandra[0]], port=cassandra[1])
    session = cluster.connect()
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE}"
        " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    yield session
    cluster.shutdown()


@pytest.fixture
def table(session: Session) -> Iterator[str]:
    """A table keyed like the persister's: a composite partition key and a clustering column."""
    name = f"{KEYSPACE}.t_{uuid.uuid4().hex[:10]}"
    session.execute(
        f"CREATE TABLE {name} (device_id text, metric text, day date, window_start timestamp, mean double,"
        " PRIMARY KEY ((device_id, metric, day), window_start))"
    )
    yield name
    session.execute(f"DROP TABLE IF EXISTS {name}")


def write(session: Session, table: str, devices: range, windows: int) -> None:
    insert = session.prepare(f"INSERT INTO {table} (device_id, metric, day, window_start, mean) VALUES (?, ?, ?, ?, ?)")
    rows = [(f"d-{d}", "temperature", "2026-11-27", w * 60_000, 20.5) for d in devices for w in range(windows)]
    execute_concurrent_with_args(session, insert, rows, concurrency=64, raise_on_first_error=True)


def full_count(session: Session, table: str) -> int:
    return int(session.execute(f"SELECT count(*) FROM {table}").one()[0])


def test_partition_key_is_read_in_order_and_empty_before_the_table_exists(session: Session, table: str) -> None:
    assert partition_key(session, table) == "device_id, metric, day"
    assert partition_key(session, f"{KEYSPACE}.not_yet") == ""


def test_counted_whole_in_one_call_equals_count_star(session: Session, table: str) -> None:
    write(session, table, range(1500), windows=2)
    assert RingCount(table, slices=32, budget_s=60).count(session) == full_count(session, table) == 3000


def test_one_slice_per_call_is_whole_after_one_turn_and_never_goes_down(session: Session, table: str) -> None:
    write(session, table, range(800), windows=1)
    counter = RingCount(table, slices=8, budget_s=0)
    seen = [counter.count(session) for _ in range(8)]
    assert seen == sorted(seen), seen
    assert 0 < seen[0] < 800, seen  # one slice of eight: some devices' partitions, not all
    assert seen[-1] == 800
    write(session, table, range(800, 1200), windows=1)
    grown = [counter.count(session) for _ in range(8)]
    assert [seen[-1], *grown] == sorted([seen[-1], *grown]), grown
    assert grown[0] > 800  # the next slice counted already shows the new partitions it holds
    assert grown[-1] == full_count(session, table) == 1200


def test_a_table_not_created_yet_counts_0_then_its_rows(session: Session) -> None:
    name = f"{KEYSPACE}.t_{uuid.uuid4().hex[:10]}"
    counter = RingCount(name)
    assert counter.count(session) == 0
    session.execute(f"CREATE TABLE {name} (device_id text, metric text, day date, window_start timestamp,"
                    " mean double, PRIMARY KEY ((device_id, metric, day), window_start))")  # fmt: skip
    try:
        write(session, name, range(10), windows=3)
        assert counter.count(session) == 30
    finally:
        session.execute(f"DROP TABLE IF EXISTS {name}")


def test_the_stores_count_the_named_table(cassandra: tuple[str, int], session: Session, table: str) -> None:
    from fluxgate_stack import ensure_up

    write(session, table, range(50), windows=4)
    endpoints: Any = ensure_up(["cassandra"])
    stores = Stores(endpoints, es_alias=f"no-such-{uuid.uuid4().hex[:6]}", table=table, ringbuffer="unused")
    try:
        assert stores.counts()["scylla"] == 200
    finally:
        stores.close()
