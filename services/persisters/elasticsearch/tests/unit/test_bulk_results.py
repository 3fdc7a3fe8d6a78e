"""Bulk responses to per-item failures, and whole-request errors to StoreUnavailable."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

import pytest
from elastic_transport import ApiResponseMeta, ConnectionTimeout, HttpHeaders, NodeConfig, SerializationError
from elastic_transport import ConnectionError as TransportConnectionError
from elasticsearch import ApiError
from elasticsearch.serializer import NdjsonSerializer

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_es_persister.settings import ConnectionSettings
from fluxgate_es_persister.sink import ElasticsearchSink, bulk_operations, item_failures
from fluxgate_sink.errors import SinkError, StoreUnavailable
from fluxgate_sink.sink import SinkItem


@dataclass(frozen=True)
class FakeStatement:
    """The parts of a KCQL statement the sink reads."""

    target: str = "temperatures"
    index_suffix: str | None = "-{YYYY.MM.dd}"
    mode: str = "INSERT"
    topic: str = "temperatures.aggregated"


def item(n: int, statement: FakeStatement | None = None, **document: Any) -> SinkItem:
    at = datetime(2026, 11, 23, 12, n % 60, tzinfo=UTC)
    source = ConsumedRecord("temperatures.aggregated", 0, n, b"d", b"\x00", {}, 0)
    doc = {"device_id": f"d{n}", "window_start": at, "mean": 20.0 + n, **document}
    return SinkItem(source, statement or FakeStatement(), "temperatures-2026.11.23", f"d{n}|{n}", doc, at)


def api_error(status: int, error: str = "error", reason: str = "") -> ApiError:
    meta = ApiResponseMeta(
        status=status, http_version="1.1", headers=HttpHeaders(), duration=0.0, node=NodeConfig("http", "es", 9200)
    )
    return ApiError(reason or error, meta=meta, body={"error": {"type": error, "reason": reason}, "status": status})


MAPPING_ERROR = {
    "type": "document_parsing_exception",
    "reason": "[1:52] failed to parse field [mean] of type [double] in document with id 'd1'",
    "caused_by": {"type": "number_format_exception", "reason": 'For input string: "warm"'},
}
REJECTED = {
    "type": "es_rejected_execution_exception",
    "reason": "rejected execution of TimedRunnable ... queue capacity = 1",
}


def response(*outcomes: tuple[int, dict[str, Any] | None], op: str = "index") -> dict[str, Any]:
    items = [{op: {"status": status, **({"error": error} if error else {})}} for status, error in outcomes]
    return {"errors": any(error for _, error in outcomes), "items": items}


def test_no_errors_means_no_failures() -> None:
    assert item_failures(response((201, None), (200, None))) == []


def test_mapping_errors_are_final_and_name_type_and_reason() -> None:
    (failure,) = item_failures(response((201, None), (400, MAPPING_ERROR), (201, None)))
    assert failure.index == 1
    assert failure.error.retriable is False
    message = str(failure.error)
    assert (
        "document_parsing_exception" in message and "field [mean]" in message and "number_format_exception" in message
    )


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, REJECTED),
        (503, {"type": "unavailable_shards_exception", "reason": "primary shard is not active"}),
        (409, {"type": "version_conflict_engine_exception", "reason": "version conflict"}),
        (500, {"type": "some_internal_exception", "reason": "?"}),
    ],
)
def test_busy_store_errors_are_retriable(status: int, error: dict[str, Any]) -> None:
    (failure,) = item_failures(response((status, error)))
    assert failure.error.retriable is True
    assert error["type"] in str(failure.error)


@pytest.mark.parametrize(
    "error_type", ["mapper_parsing_exception", "illegal_argument_exception", "strict_dynamic_mapping_exception"]
)
def test_document_errors_are_not_retriable(error_type: str) -> None:
    (failure,) = item_failures(response((400, {"type": error_type, "reason": "no"})))
    assert failure.error.retriable is False


def test_indexes_are_offset_by_the_chunk_start() -> None:
    failures = item_failures(response((429, REJECTED), (201, None), (400, MAPPING_ERROR)), offset=1000)
    assert [(f.index, f.error.retriable) for f in failures] == [(1000, True), (1002, False)]


def test_update_results_are_read_like_index_results() -> None:
    (failure,) = item_failures(response((201, None), (429, REJECTED), op="update"))
    assert (failure.index, failure.error.retriable) == (1, True)


def test_insert_is_index_with_the_id_and_upsert_is_doc_as_upsert() -> None:
    insert, upsert = item(1), item(2, FakeStatement(mode="UPSERT"))
    operations = bulk_operations([insert, upsert])
    assert operations[0] == {"index": {"_index": "temperatures-2026.11.23", "_id": "d1|1"}}
    assert operations[1] is insert.document
    assert operations[2]["update"]["_id"] == "d2|2"
    assert operations[3] == {"doc": upsert.document, "doc_as_upsert": True}


class FakeClient:
    """Answers each bulk call with the next scripted response, or raises it."""

    def __init__(self, *answers: Mapping[str, Any] | Exception) -> None:
        self.answers = list(answers)
        self.bulks: list[Sequence[Mapping[str, Any]]] = []
        self.closed = 0

    async def bulk(self, *, operations: Sequence[Mapping[str, Any]], **_: Any) -> Any:
        self.bulks.append(operations)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return type("Response", (), {"body": answer})()

    async def close(self) -> None:
        self.closed += 1


def sink(client: FakeClient, **settings: Any) -> ElasticsearchSink:
    return ElasticsearchSink(ConnectionSettings(**settings), client)


async def test_large_batches_go_in_chunks_and_failures_keep_batch_indexes() -> None:
    client = FakeClient(
        response((201, None), (201, None)), response((201, None), (429, REJECTED)), response((201, None))
    )
    failures = await sink(client, bulk_max_actions=2).write_batch([item(n) for n in range(5)])
    assert [len(ops) // 2 for ops in client.bulks] == [2, 2, 1]
    assert [(f.index, f.error.retriable) for f in failures] == [(3, True)]


@pytest.mark.parametrize(
    "exc",
    [
        TransportConnectionError("Connection refused"),
        ConnectionTimeout("timed out"),
        api_error(503, "cluster_block_exception", "blocked"),
        api_error(429, "es_rejected_execution_exception", "queue full"),
        api_error(502, "bad_gateway"),
        SerializationError("Unable to deserialize as JSON: b'<html>'"),  # the response, not a document
    ],
)
async def test_whole_request_failures_raise_store_unavailable(exc: Exception) -> None:
    with pytest.raises(StoreUnavailable) as caught:
        await sink(FakeClient(exc)).write_batch([item(1)])
    assert caught.value.retriable is True
    assert caught.value.__cause__ is exc


async def test_a_refused_request_is_not_a_store_outage() -> None:
    with pytest.raises(SinkError) as caught:
        await sink(FakeClient(api_error(403, "security_exception", "unauthorized"))).write_batch([item(1)])
    assert not isinstance(caught.value, StoreUnavailable)
    assert caught.value.retriable is False


async def test_close_twice_closes_once() -> None:
    client = FakeClient()
    es = sink(client)
    await es.close()
    await es.close()
    assert client.closed == 1


class PoisonedClient(FakeClient):
    """Refuses as a whole every bulk request that holds the poison item's id; writes the others."""

    def __init__(self, poison: str, refusal: ApiError) -> None:
        super().__init__()
        self.poison, self.refusal = poison, refusal
        self.written: list[str] = []

    async def bulk(self, *, operations: Sequence[Mapping[str, Any]], **_: Any) -> Any:
        self.bulks.append(operations)
        ids = [op["index"]["_id"] for op in operations[::2]]
        if self.poison in ids:
            raise self.refusal
        self.written.extend(ids)
        return type("Response", (), {"body": response(*[(201, None)] * len(ids))})()


@pytest.mark.parametrize(
    "refusal",
    [
        api_error(400, "action_request_validation_exception", "Validation Failed: 1: id [..] is too long"),
        api_error(413, "http_content_too_long", "request too large"),
    ],
)
async def test_a_request_refused_for_one_item_fails_that_item_alone(refusal: ApiError) -> None:
    client = PoisonedClient("d37|37", refusal)
    items = [item(n) for n in range(100)]
    failures = await sink(client, bulk_max_actions=64).write_batch(items)
    assert [(f.index, f.error.retriable) for f in failures] == [(37, False)]
    assert str(refusal.body["error"]["type"]) in str(failures[0].error)
    assert sorted(client.written) == sorted(i.id for i in items if i.id != "d37|37")
    assert len(client.bulks) <= 2 + 2 * 6  # the chunks, then two halves per round down to one item


async def test_a_request_refused_for_its_credentials_is_not_split() -> None:
    client = PoisonedClient("d1|1", api_error(401, "security_exception", "missing authentication credentials"))
    with pytest.raises(SinkError, match="401"):
        await sink(client).write_batch([item(n) for n in range(10)])
    assert len(client.bulks) == 1


class SerializingClient(FakeClient):
    """Serializes each bulk request as the real client does before sending it; writes what serializes."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []

    async def bulk(self, *, operations: Sequence[Mapping[str, Any]], **_: Any) -> Any:
        self.bulks.append(operations)
        NdjsonSerializer().dumps(operations)  # raises elastic_transport.SerializationError
        ids = [op["index"]["_id"] for op in operations[::2]]
        self.written.extend(ids)
        return type("Response", (), {"body": response(*[(201, None)] * len(ids))})()


async def test_a_document_without_a_json_form_fails_alone_instead_of_looking_like_an_outage() -> None:
    # A header Kafka Connect reads as a Time is a datetime.time, which the client cannot serialize.
    client = SerializingClient()
    items = [item(n, **({"at": time(12, 34, 56)} if n == 4 else {})) for n in range(10)]
    failures = await sink(client).write_batch(items)
    assert [(f.index, f.error.retriable) for f in failures] == [(4, False)]
    assert "no JSON form" in str(failures[0].error) and "datetime.time" in str(failures[0].error)
    assert sorted(client.written) == sorted(i.id for i in items if i.id != "d4|4")


@pytest.mark.parametrize(
    "mimetype", ["application/x-ndjson", "application/vnd.elasticsearch+x-ndjson; compatible-with=9"]
)
async def test_bytes_are_written_as_base64_as_kafka_connects_json_writes_them(mimetype: str) -> None:
    # JsonConverter.fromConnectData of a BYTES field (connect-json 4.4.0) writes {"b":"AAH7/w=="}: a
    # ByteArrayConverter header or a bytes field of the value, nested or not, is written the same.
    es = ElasticsearchSink(ConnectionSettings())  # the real client, which sends nothing until asked
    document = {"b": b"\x00\x01\xfb\xff", "nested": {"list": [b"a"]}, "text": "t"}
    try:
        body = es.client.transport.serializers.dumps(bulk_operations([item(1, **document)]), mimetype=mimetype)
    finally:
        await es.close()
    source = json.loads(body.splitlines()[1])
    assert (source["b"], source["nested"], source["text"]) == ("AAH7/w==", {"list": ["YQ=="]}, "t")
