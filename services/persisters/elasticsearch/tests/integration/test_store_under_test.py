"""The suite's view of Elasticsearch (``elasticsearch_store``) reads every document, not a page."""

from __future__ import annotations

from elasticsearch import Elasticsearch, helpers
from elasticsearch_store import ElasticsearchUnderTest


def test_documents_reads_past_the_first_10000_hits(es_url: str) -> None:
    """A search answers at most 10,000 hits (index.max_result_window): a suite test waiting for
    10,200 documents through one search waited for ever."""
    store = ElasticsearchUnderTest(es_url)
    target = store.new_target()
    client = Elasticsearch(es_url, request_timeout=30)
    client.indices.create(index=f"{target}-2026.03.14", aliases={target: {}})
    try:
        actions = ({"_index": target, "_id": f"id-{i}", "n": i} for i in range(10_001))
        assert helpers.bulk(client, actions, chunk_size=5_000) == (10_001, [])
        documents = store.documents(target)
        assert len(documents) == store.count(target) == 10_001
        assert documents["id-10000"] == {"n": 10_000}
    finally:
        store.drop(target)
        client.close()
