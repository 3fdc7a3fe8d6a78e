"""The Elasticsearch persister's store as the shared sink suite (``fluxgate_testing.sink.suite``)
sees it; used by this package's integration tests, never by the service."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch, helpers
from fluxgate_testing.sink.store import StoreUnderTest


class ElasticsearchUnderTest(StoreUnderTest):
    """Daily indices ``<target>-YYYY.MM.dd`` read back through the ``<target>`` alias."""

    argv = (str(Path(sys.executable).with_name("fluxgate-es-persister")),)
    env_prefix = "FLUXGATE_ES_"

    def __init__(self, url: str, **settings: str) -> None:
        self.url = url
        self.client = Elasticsearch(url, request_timeout=30)
        self.settings = settings  # more ELASTICSEARCH__ settings, e.g. NUMBER_OF_SHARDS

    def env(self) -> dict[str, str]:
        more = {f"ELASTICSEARCH__{name.upper()}": value for name, value in self.settings.items()}
        return {"ELASTICSEARCH__HOSTS": f'["{self.url}"]', "RETENTION__ENABLED": "false", **more}

    def new_target(self) -> str:
        return f"suite-{uuid.uuid4().hex[:10]}"

    def kcql(self, topic: str, target: str) -> str:
        return f"INSERT INTO {target} SELECT * FROM {topic} WITHINDEXSUFFIX=-{{YYYY.MM.dd}}"

    def documents(self, target: str) -> dict[str, dict[str, Any]]:
        if not self.client.indices.exists_alias(name=target):
            return {}
        self.client.indices.refresh(index=target)
        # Scrolled, every page: one search answers at most index.max_result_window (10,000) hits,
        # and a suite test that ran long on a loaded machine once produced 10,200 (stop 65's CI).
        found = helpers.scan(self.client, index=target, query={"query": {"match_all": {}}}, size=5_000)
        return {hit["_id"]: hit["_source"] for hit in found}

    def count(self, target: str) -> int:
        if not self.client.indices.exists_alias(name=target):
            return 0
        self.client.indices.refresh(index=target)
        return int(self.client.count(index=target)["count"])

    def refused_value(self, value: dict[str, Any]) -> dict[str, Any]:
        # A keyword longer than Lucene's 32766-byte term limit: valid Avro, refused per document.
        return {**value, "unit": "x" * 40_000}

    def kill(self) -> None:
        import fluxgate_stack  # the local stack tool: tests have it, the service does not

        fluxgate_stack.kill("elasticsearch")

    def start(self) -> None:
        import fluxgate_stack

        fluxgate_stack.start("elasticsearch")

    def drop(self, target: str) -> None:
        self.client.indices.delete(index=f"{target}-*", ignore_unavailable=True, expand_wildcards="all")
        self.client.options(ignore_status=404).indices.delete_index_template(name=target)
