"""``sink.semantics=stream-reactor`` (what ``fluxgate connect`` sets) against a real member: a
connector's statement lands where Stream-Reactor's Hazelcast sink would write it."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import fastavro
import pytest
from hazelcast.asyncio import HazelcastClient
from hazelcast_store import START, aggregate, item, items

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_hazelcast_persister.settings import ConnectionSettings
from fluxgate_hazelcast_persister.sink import HazelcastSink
from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.sink import SinkItem

pytestmark = pytest.mark.integration
GROUP = "stream-reactor-semantics-tests"
# A reliable topic's items are kept in the ringbuffer of this name (Hazelcast's
# RingbufferService.TOPIC_RB_PREFIX), each a ReliableTopicMessage: read there, they do not depend
# on a listener's timing.
RELIABLE_TOPIC_RINGBUFFER = "_hz_rb_"


@pytest.fixture
async def sink(hz_member: Any) -> AsyncIterator[HazelcastSink]:
    settings = ConnectionSettings(members=[hz_member.address], cluster_name=hz_member.cluster_name)
    hz_sink = HazelcastSink(settings, GROUP, semantics="stream-reactor")
    yield hz_sink
    await hz_sink.close()


def _statement(text: str) -> Statement:
    (parsed,) = parse(text)
    return parsed


async def _read_all(hz: HazelcastClient, ringbuffer_name: str, count: int) -> list[Any]:
    """The first ``count`` items, waiting (30 s at most) for them as a loaded member may be slow."""
    ringbuffer = await hz.get_ringbuffer(ringbuffer_name)
    read = await asyncio.wait_for(ringbuffer.read_many(0, count, count), timeout=30)
    return list(read)


@pytest.mark.parametrize("store_as", ["", " STOREAS MAP"])
async def test_no_storeas_and_map_write_a_reliable_topic(
    sink: HazelcastSink, hz: HazelcastClient, name: str, store_as: str
) -> None:
    # HazelCastSinkSettings.scala: a missing or unknown STOREAS (MAP included) is RELIABLE_TOPIC.
    stmt = _statement(f"INSERT INTO {name} SELECT * FROM temperatures.aggregated{store_as}")
    await sink.setup([stmt])
    batch = items(stmt, 20)
    assert await sink.write_batch(batch) == []
    read = await _read_all(hz, RELIABLE_TOPIC_RINGBUFFER + name, 20)
    # Writer.scala stores toJson(record).toString: a java.lang.String, which this client reads as a str.
    assert {type(m.payload) for m in read} == {str}
    assert [json.loads(m.payload)["device_id"] for m in read] == [i.document["device_id"] for i in batch]
    assert await (await hz.get_ringbuffer(name)).size() == 0  # not where our semantics would write it


async def test_an_imap_ttl_is_in_milliseconds(sink: HazelcastSink, hz: HazelcastClient, name: str) -> None:
    # MapWriter.scala: put(key, value, ttl, TimeUnit.MILLISECONDS). TTL=600000 is ten minutes: the
    # entry is still there when read, and the member reports the TTL it keeps, in milliseconds.
    stmt = _statement(f"INSERT INTO {name} SELECT * FROM temperatures.aggregated PK device_id STOREAS IMAP TTL=600000")
    await sink.setup([stmt])
    written = item(stmt, aggregate(1, 0), 0)
    assert await sink.write_batch([written]) == []
    view = await (await hz.get_map(name)).get_entry_view(written.id)
    assert view is not None and view.ttl == 600_000


@pytest.fixture
async def text_sink(hz_member: Any) -> AsyncIterator[HazelcastSink]:
    """A sink of StringConverter values (sink.value_format=string), as fluxgate connect runs one."""
    settings = ConnectionSettings(members=[hz_member.address], cluster_name=hz_member.cluster_name)
    hz_sink = HazelcastSink(settings, GROUP, semantics="stream-reactor", text_values=True)
    yield hz_sink
    await hz_sink.close()


# StringConverter texts as a topic holds them; what a reader gets back is the text itself, as one
# JSON string, which Stream-Reactor's writers/Writer.scala stores (SimpleJsonConverter: a TextNode).
TEXTS = [b'{"device_id":"d1","temperature":21.50}', b'{"device_id": "d2", "note": "line\\nbreak \xc3\xa9"}']


def _text_item(stmt: Statement, text: bytes, offset: int) -> SinkItem:
    """The router's item of a StringConverter value: the consumed text, the document read from it
    (projected), the map key from its PK (the values joined by '-', fluxgate_sink.ids)."""
    document = json.loads(text)
    source = ConsumedRecord("t", 0, offset, b"k", text, (), 0, document)
    key = "-".join(str(document[path[0]]) for path in stmt.pk)
    return SinkItem(source, stmt, stmt.target, key, stmt.project(document), START)


@pytest.mark.parametrize(
    "clauses",
    ["SELECT * FROM t STOREAS RING_BUFFER", "SELECT device_id FROM t PK device_id STOREAS IMAP", "SELECT * FROM t"],
)
async def test_a_reader_gets_the_text_as_stream_reactor_stored_it(
    text_sink: HazelcastSink, hz: HazelcastClient, name: str, clauses: str
) -> None:
    stmt = _statement(f"INSERT INTO {name} {clauses}")
    await text_sink.setup([stmt])
    batch = [_text_item(stmt, text, n) for n, text in enumerate(TEXTS)]
    assert await text_sink.write_batch(batch) == []
    if stmt.store_as == "IMAP":
        imap = await hz.get_map(name)
        read = [await imap.get(i.id) for i in batch]
    elif stmt.store_as == "RING_BUFFER":
        read = await _read_all(hz, name, len(TEXTS))
    else:  # no STOREAS: a reliable topic (HazelCastSinkSettings.scala), its items in its ringbuffer
        read = [m.payload for m in await _read_all(hz, RELIABLE_TOPIC_RINGBUFFER + name, len(TEXTS))]
    assert read == [  # strs: Java Strings, as Writer.scala's toJson(record).toString
        r'"{\"device_id\":\"d1\",\"temperature\":21.50}"',
        r'"{\"device_id\": \"d2\", \"note\": \"line\\nbreak é\"}"',
    ]
    # Decoded, each is the text the topic holds, byte for byte: not the document parsed from it.
    assert [json.loads(value).encode() for value in read] == TEXTS


async def test_withformat_avro_stores_the_plain_avro_body(sink: HazelcastSink, hz: HazelcastClient, name: str) -> None:
    # Writer.scala: convert for AVRO is serializeAvro(toAvro(record)), plain Avro binary (a byte[]),
    # no registry header: for SELECT * the record's own body, which a reader decodes with the schema.
    schema = fastavro.parse_schema(schema_dict(TEMPERATURE_AGGREGATE))
    stmt = _statement(f"INSERT INTO {name} SELECT * FROM temperatures.aggregated STOREAS RING_BUFFER WITHFORMAT AVRO")
    await sink.setup([stmt])
    records = [aggregate(n, n) for n in range(3)]
    bodies = []
    for record in records:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema, record)
        bodies.append(body.getvalue())
    batch = [
        item(stmt, record, n, value=b"\x00\x00\x00\x00\x07" + body)
        for n, (record, body) in enumerate(zip(records, bodies, strict=True))
    ]
    assert await sink.write_batch(batch) == []
    read = await _read_all(hz, name, 3)
    assert [bytes(value) for value in read] == bodies
    assert fastavro.schemaless_reader(io.BytesIO(bytes(read[0])), schema)["device_id"] == records[0]["device_id"]
