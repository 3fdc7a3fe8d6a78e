"""``sink.semantics=stream-reactor`` (what ``fluxgate connect`` sets) against a real member: a
connector's statement lands where Stream-Reactor's Hazelcast sink would write it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hazelcast.asyncio import HazelcastClient
from hazelcast_store import aggregate, item, items

from fluxgate_hazelcast_persister.settings import ConnectionSettings
from fluxgate_hazelcast_persister.sink import HazelcastSink
from fluxgate_sink.kcql import Statement, parse

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
    assert [json.loads(m.payload.to_string())["device_id"] for m in read] == [i.document["device_id"] for i in batch]
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
