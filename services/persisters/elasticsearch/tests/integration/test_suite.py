"""The shared sink suite (fluxgate_sink.testing.suite) against the real Elasticsearch."""

from __future__ import annotations

import pytest

from fluxgate_es_persister.testing import ElasticsearchUnderTest
from fluxgate_sink.testing.store import StoreUnderTest
from fluxgate_sink.testing.suite import SinkSuite


class TestElasticsearchSinkSuite(SinkSuite):
    @pytest.fixture
    def store(self, es_url: str) -> StoreUnderTest:
        return ElasticsearchUnderTest(es_url)
