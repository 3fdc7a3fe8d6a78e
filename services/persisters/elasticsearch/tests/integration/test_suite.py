"""The shared sink suite (fluxgate_testing.sink.suite) against the real Elasticsearch."""

from __future__ import annotations

import pytest
from elasticsearch_store import ElasticsearchUnderTest
from fluxgate_testing.sink.store import StoreUnderTest
from fluxgate_testing.sink.suite import SinkSuite


class TestElasticsearchSinkSuite(SinkSuite):
    server = "elasticsearch"

    @pytest.fixture
    def store(self, es_url: str) -> StoreUnderTest:
        return ElasticsearchUnderTest(es_url)
