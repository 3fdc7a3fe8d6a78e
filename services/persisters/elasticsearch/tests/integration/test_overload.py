"""Real 429s: a throw-away node with one write thread and a queue of one refuses most shard
requests of a large bulk; retrying only what failed retriably ends with each document once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from fluxgate_es_persister.settings import ConnectionSettings
from fluxgate_es_persister.sink import ElasticsearchSink
from fluxgate_sink.errors import StoreUnavailable
from fluxgate_sink.kcql import Statement
from fluxgate_sink.sink import SinkItem

pytestmark = pytest.mark.integration
DOCUMENTS = 3000
SHARDS = 6  # one bulk fans out into a shard request per shard: more than one thread + one queued


@pytest.fixture(scope="module")
def tiny_queue_node() -> Iterator[str]:
    from fluxgate_stack.servers.elasticsearch import throwaway_node

    with throwaway_node({"thread_pool.write.size": "1", "thread_pool.write.queue_size": "1"}) as url:
        yield url


async def write_until_done(sink: ElasticsearchSink, items: list[SinkItem]) -> tuple[int, int]:
    """What the runner does: write, then write again only the retriable failures. Returns
    (rounds, retriable failures seen)."""
    pending, rounds, rejected = items, 0, 0
    while pending:
        rounds += 1
        assert rounds <= 200, f"{len(pending)} documents still refused after 200 rounds"
        try:
            failures = await sink.write_batch(pending)
        except StoreUnavailable:
            await asyncio.sleep(0.05)
            continue
        assert all(f.error.retriable for f in failures), [str(f.error) for f in failures if not f.error.retriable]
        rejected += len(failures)
        pending = [pending[f.index] for f in failures]
        if pending:
            await asyncio.sleep(0.02)
    return rounds, rejected


async def test_rejected_items_are_retriable_and_retrying_them_writes_each_document_once(
    tiny_queue_node: str,
    target: str,
    target_statement: Statement,
    items_for: Callable[[list[dict[str, Any]]], list[SinkItem]],
    make_aggregate: Callable[..., dict[str, Any]],
) -> None:
    sink = ElasticsearchSink(
        ConnectionSettings(hosts=[tiny_queue_node], number_of_shards=SHARDS, bulk_max_actions=500)  # type: ignore[call-arg]
    )
    client = AsyncElasticsearch(tiny_queue_node, request_timeout=30)
    try:
        await sink.setup([target_statement])
        start = datetime(2022, 1, 1, tzinfo=UTC)
        records = [make_aggregate(f"d{n % 50}", start + timedelta(minutes=n // 50)) for n in range(DOCUMENTS)]
        items = items_for(records)
        halves = [items[: DOCUMENTS // 2], items[DOCUMENTS // 2 :]]
        # Two batches at once, as two partitions' batches are written concurrently.
        outcomes = await asyncio.gather(*(write_until_done(sink, half) for half in halves))
        assert sum(rejected for _, rejected in outcomes) > 0, "the node never answered 429: the test proves nothing"
        await client.indices.refresh(index=target)
        assert (await client.count(index=target))["count"] == DOCUMENTS
        ids = await client.search(index=target, size=0, aggs={"ids": {"cardinality": {"field": "window_start"}}})
        assert ids["aggregations"]["ids"]["value"] == DOCUMENTS // 50
    finally:
        await sink.close()
        await client.close()
