"""A real Elasticsearch for every test here; each test gets its own target (index family)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch
from fluxgate_testing.aggregates import temperature_aggregate
from fluxgate_testing.sink.items import sink_item

from fluxgate_es_persister.settings import ConnectionSettings
from fluxgate_es_persister.sink import ElasticsearchSink
from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.sink import SinkItem

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def es_url(request: pytest.FixtureRequest) -> str:
    """The stack's Elasticsearch: the root ``elasticsearch`` fixture, else started (or reused) here."""
    try:
        return str(request.getfixturevalue("elasticsearch"))
    except pytest.FixtureLookupError:
        from fluxgate_stack import ensure_up

        return ensure_up(["elasticsearch"]).elasticsearch_url


@pytest.fixture
def target() -> str:
    return f"test-temps-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def es(es_url: str, target: str) -> AsyncIterator[AsyncElasticsearch]:
    """A client for assertions; deletes the test's indices and template afterwards."""
    client = AsyncElasticsearch(es_url, request_timeout=30)
    yield client
    await client.indices.delete(index=f"{target}*", ignore_unavailable=True, expand_wildcards="all")
    await client.options(ignore_status=404).indices.delete_index_template(name=target)
    await client.close()


@pytest.fixture
async def sink(es_url: str) -> AsyncIterator[ElasticsearchSink]:
    es_sink = ElasticsearchSink(ConnectionSettings(hosts=[es_url]))
    yield es_sink
    await es_sink.close()


def statement(target: str, mode: str = "INSERT") -> Statement:
    (parsed,) = parse(
        f"{mode} INTO {target} SELECT * FROM temperatures.aggregated"
        " PK device_id, metric, window_start WITHINDEXSUFFIX=-{YYYY.MM.dd}"
    )
    return parsed


def aggregate(device: str, window_start: datetime, **changes: Any) -> dict[str, Any]:
    """A decoded TemperatureAggregate (timestamps as aware datetimes, as fastavro gives them)."""
    return temperature_aggregate(device, window_start, **{"stddev": 0.8165, **changes})


def as_item(stmt: Statement, record: dict[str, Any], offset: int = 0) -> SinkItem:
    """What the runner's router makes of a decoded record."""
    return sink_item(stmt, record, offset, key=record["device_id"].encode())


@pytest.fixture
def items_for(target: str) -> Callable[[list[dict[str, Any]]], list[SinkItem]]:
    """SinkItems of the test's target, from decoded records, as the runner routes them."""

    def make(records: list[dict[str, Any]]) -> list[SinkItem]:
        stmt = statement(target)
        return [as_item(stmt, record, offset) for offset, record in enumerate(records)]

    return make


@pytest.fixture
def make_aggregate() -> Callable[..., dict[str, Any]]:
    return aggregate


@pytest.fixture
def target_statement(target: str) -> Statement:
    return statement(target)
