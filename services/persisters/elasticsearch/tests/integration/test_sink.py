"""ElasticsearchSink against a real node: daily indices, the alias, per-item failures, retention."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from fluxgate_es_persister.mapping import IndexFamily
from fluxgate_es_persister.retention import Retention
from fluxgate_es_persister.settings import ConnectionSettings, RetentionSettings
from fluxgate_es_persister.sink import ElasticsearchSink
from fluxgate_sink.errors import StoreUnavailable
from fluxgate_sink.kcql import Statement
from fluxgate_sink.sink import SinkItem

pytestmark = pytest.mark.integration
Items = Callable[[list[dict[str, Any]]], list[SinkItem]]
Aggregate = Callable[..., dict[str, Any]]


async def documents(es: AsyncElasticsearch, index: str) -> list[dict[str, Any]]:
    await es.indices.refresh(index=index)
    found = await es.search(index=index, size=1000, sort=["_doc"], seq_no_primary_term=False)
    return [{"_index": hit["_index"], "_id": hit["_id"], **hit["_source"]} for hit in found["hits"]["hits"]]


async def test_windows_either_side_of_midnight_land_in_two_daily_indices_behind_the_alias(
    sink: ElasticsearchSink,
    es: AsyncElasticsearch,
    target: str,
    target_statement: Statement,
    items_for: Items,
    make_aggregate: Aggregate,
) -> None:
    # Fixed dates far from today: the event time names the index, never the wall clock.
    before = datetime(2021, 3, 4, 23, 59, 30, tzinfo=UTC)
    after = datetime(2021, 3, 5, 0, 0, 30, tzinfo=UTC)
    await sink.setup([target_statement])
    items = items_for([make_aggregate("d1", before), make_aggregate("d1", after)])
    assert await sink.write_batch(items) == []
    assert await sink.write_batch(items) == []  # a replay overwrites, never duplicates

    found = await documents(es, target)  # the alias: one name for every day
    assert {(doc["_index"], doc["window_start"]) for doc in found} == {
        (f"{target}-2021.03.04", "2021-03-04T23:59:30+00:00"),
        (f"{target}-2021.03.05", "2021-03-05T00:00:30+00:00"),
    }
    assert len(found) == 2
    assert {doc["_id"] for doc in found} == {
        f"d1|temperature|{int(before.timestamp() * 1000)}",
        f"d1|temperature|{int(after.timestamp() * 1000)}",
    }
    mapping = await es.indices.get_mapping(index=f"{target}-2021.03.04")
    properties = mapping[f"{target}-2021.03.04"]["mappings"]["properties"]
    assert properties["window_start"]["type"] == "date"
    assert properties["mean"]["type"] == "double"
    assert properties["device_id"]["type"] == "keyword"
    in_range = await es.count(
        index=target, query={"range": {"window_start": {"gte": "2021-03-05T00:00:00Z", "lt": "2021-03-06T00:00:00Z"}}}
    )
    assert in_range["count"] == 1


async def test_a_document_violating_the_mapping_fails_alone_and_for_good(
    sink: ElasticsearchSink,
    es: AsyncElasticsearch,
    target: str,
    target_statement: Statement,
    items_for: Items,
    make_aggregate: Aggregate,
) -> None:
    start = datetime(2021, 6, 1, 12, 0, tzinfo=UTC)
    records = [make_aggregate(f"d{n}", start) for n in range(5)]
    records[2]["mean"] = "warm"  # a string in a double field
    await sink.setup([target_statement])
    failures = await sink.write_batch(items_for(records))
    assert [failure.index for failure in failures] == [2]
    (failure,) = failures
    assert failure.error.retriable is False
    assert "document_parsing_exception" in str(failure.error) or "mapper_parsing_exception" in str(failure.error)
    assert "mean" in str(failure.error)
    assert sorted(doc["device_id"] for doc in await documents(es, target)) == ["d0", "d1", "d3", "d4"]


async def test_bytes_are_written_as_base64_as_kafka_connect_s_json_converter_writes_them(
    sink: ElasticsearchSink,
    es: AsyncElasticsearch,
    target: str,
    target_statement: Statement,
    items_for: Items,
    make_aggregate: Aggregate,
) -> None:
    # A bytes field (Avro bytes, a ByteArrayConverter header): JsonConverter's BinaryNode, padded base64.
    record = make_aggregate("d0", datetime(2021, 6, 1, 12, 0, tzinfo=UTC))
    await sink.setup([target_statement])
    [item] = items_for([record])
    assert await sink.write_batch([item._replace(document={**item.document, "raw": b"\x00\x01\xfb\xff"})]) == []
    [document] = await documents(es, target)
    assert document["raw"] == "AAH7/w=="


async def test_retention_deletes_by_the_date_in_the_name(es_url: str, es: AsyncElasticsearch, target: str) -> None:
    today = datetime.now(UTC).date()
    names = {
        "old": f"{target}-{_dotted(today - timedelta(days=8))}",
        "yesterday": f"{target}-{_dotted(today - timedelta(days=1))}",
        "today": f"{target}-{_dotted(today)}",
        "other": f"{target}-old-stuff",
        "prefix": f"{target}x-{_dotted(today - timedelta(days=30))}",
    }
    for name in names.values():
        await es.indices.create(index=name)
    retention = Retention(es, [IndexFamily(target, "-{YYYY.MM.dd}")], RetentionSettings(days=7))
    expired = await retention.sweep()
    assert [old.index for old in expired] == [names["old"]]
    left = await es.indices.get(index=f"{target}*", expand_wildcards="all")
    assert set(left) == {names["yesterday"], names["today"], names["other"], names["prefix"]}


async def test_setup_fails_fast_naming_the_host() -> None:
    es_sink = ElasticsearchSink(ConnectionSettings(hosts=["http://127.0.0.1:9"], request_timeout=2))
    try:
        with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:9"):
            await es_sink.setup([])
        assert await es_sink.ping() is False
    finally:
        await es_sink.close()


def _dotted(day: date) -> str:
    return day.strftime("%Y.%m.%d")


async def test_an_id_over_elasticsearchs_512_bytes_fails_alone_not_the_whole_bulk_request(
    sink: ElasticsearchSink,
    es: AsyncElasticsearch,
    target: str,
    target_statement: Statement,
    items_for: Items,
    make_aggregate: Aggregate,
) -> None:
    """Issue 35: one ``_id`` over 512 bytes made Elasticsearch refuse the whole bulk request
    (400 ``action_request_validation_exception``), and the persister stopped. The router no
    longer makes such an id; an item that has one anyway fails alone, naming the cause."""
    start = datetime(2021, 6, 2, 12, 0, tzinfo=UTC)
    items = items_for([make_aggregate(f"d{n}", start) for n in range(40)])
    items[17] = items[17]._replace(id="温" * 200)  # 600 bytes of UTF-8, what the router once made
    await sink.setup([target_statement])
    failures = await sink.write_batch(items)
    assert [failure.index for failure in failures] == [17]
    (failure,) = failures
    assert failure.error.retriable is False
    assert "action_request_validation_exception" in str(failure.error) and "no longer than 512 bytes" in str(
        failure.error
    )
    written = sorted(doc["device_id"] for doc in await documents(es, target))
    assert written == sorted(f"d{n}" for n in range(40) if n != 17)


async def test_a_device_id_of_256_multibyte_characters_is_written_under_a_safe_id(
    sink: ElasticsearchSink,
    es: AsyncElasticsearch,
    target: str,
    target_statement: Statement,
    items_for: Items,
    make_aggregate: Aggregate,
) -> None:
    """The device id the gateways allow at most, in 3-byte UTF-8: the id the PK makes (768
    bytes and more) is over Elasticsearch's limit, so it is hashed; the same record twice is
    one document (a replay stays idempotent)."""
    start = datetime(2021, 6, 3, 12, 0, tzinfo=UTC)
    records = [make_aggregate("温" * 256, start), make_aggregate("d1", start)]
    await sink.setup([target_statement])
    assert await sink.write_batch(items_for(records)) == []
    assert await sink.write_batch(items_for(records)) == []
    found = {doc["device_id"]: doc["_id"] for doc in await documents(es, target)}
    assert len(found) == 2
    assert found["d1"] == f"d1|temperature|{int(start.timestamp() * 1000)}"  # short ids as they were
    assert len(found["温" * 256].encode()) <= 512
