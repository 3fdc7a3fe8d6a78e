"""Real 429s: a throw-away node with one write thread and a write queue of one refuses most
shard requests of the persister's bulks; the persister writes the refused items again and
ends with every document exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from elasticsearch_store import ElasticsearchUnderTest
from fluxgate_testing.sink.suite import Run, aggregates, expected_ids

pytestmark = pytest.mark.integration
DOCUMENTS = 3000
SHARDS = "6"  # one bulk fans out into a shard request per shard: more than one thread + one queued


@pytest.fixture(scope="module")
def tiny_queue_node() -> Iterator[str]:
    from fluxgate_stack.servers.elasticsearch import throwaway_node

    with throwaway_node({"thread_pool.write.size": "1", "thread_pool.write.queue_size": "1"}) as url:
        yield url


def test_a_node_answering_429_loses_nothing(tiny_queue_node: str, stack: Any, registry_client: Any) -> None:
    store = ElasticsearchUnderTest(tiny_queue_node, number_of_shards=SHARDS)
    run = Run(stack, store, registry_client)
    try:
        values = aggregates(DOCUMENTS)
        run.produce(values)
        # A 429 must never throw; the store is only busy, so back off briefly (the test has no time to lose).
        persister = run.persister(batch_size="500", error_policy="THROW", outage_max_backoff_ms="1000").start()
        run.wait_for(persister, DOCUMENTS, timeout=120)
        retried = persister.metric("fluxgate_sink_records_retried_total")
        assert retried > 0, "the node never answered 429: the test proves nothing"
        assert persister.terminate() == 0
        assert store.count(run.target) == DOCUMENTS
        assert set(store.documents(run.target)) == expected_ids(values)
    finally:
        run.close()
