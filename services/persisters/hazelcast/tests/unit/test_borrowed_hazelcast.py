"""What the Hazelcast persister borrows from hazelcast-python-client's private code (pinned
`hazelcast-python-client>=5.7,<6` in pyproject.toml), checked against the installed release: a
new client that renames or changes any of it fails here, naming what changed and where the
persister relies on it, not in production.

* ``sink.py: _add_to_ringbuffer`` sends a ringbuffer's JSON values through the asyncio proxy's
  private ``_invoke(request, response_handler)``, the call ``Ringbuffer.add_all`` makes itself,
  with a request it framed at once (``values.add_all_json_request``);
* ``values.add_all_json_request`` starts from ``ringbuffer_add_all_codec.encode_request(name, [],
  policy)`` (a codec module, no public API) and puts each value's frame inside the list: a
  frame is a little-endian length (header included), two bytes of flags, then the value; the
  list ends with ``BEGIN_FRAME_BUF`` then ``END_FINAL_FRAME_BUF`` (``protocol.client_message``);
* ``values.json_data`` builds a ``HazelcastJsonValue``'s serialized form (partition hash, the
  JSON serializer's type id ``JAVASCRIPT_JSON_SERIALIZATION_TYPE``, the string's big-endian
  length, its UTF-8) as a ``serialization.data.Data``, which the client's ``to_data`` must hand
  on as it is for queues, maps and reliable topics.
"""

from __future__ import annotations

import asyncio
import inspect
import struct
from types import SimpleNamespace
from typing import Any

import hazelcast
import pytest
from hazelcast.core import HazelcastJsonValue
from hazelcast.internal.asyncio_proxy import base as proxy_base
from hazelcast.internal.asyncio_proxy.ringbuffer import Ringbuffer
from hazelcast.protocol.builtin import DataCodec, ListMultiFrameCodec
from hazelcast.protocol.client_message import (
    BEGIN_FRAME_BUF,
    END_FINAL_FRAME_BUF,
    RESPONSE_HEADER_SIZE,
    OutboundMessage,
)
from hazelcast.protocol.codec import ringbuffer_add_all_codec as add_all_codec
from hazelcast.proxy.ringbuffer import MAX_BATCH_SIZE, OVERFLOW_POLICY_FAIL, OVERFLOW_POLICY_OVERWRITE
from hazelcast.serialization.data import Data
from hazelcast.serialization.serialization_const import JAVASCRIPT_JSON_SERIALIZATION_TYPE
from hazelcast_store import aggregate, client_serialization

from fluxgate_hazelcast_persister import sink as sink_module
from fluxgate_hazelcast_persister.values import add_all_json_request, json_bytes, json_data

WHERE = "services/persisters/hazelcast/src/fluxgate_hazelcast_persister"
VERSION = f"hazelcast-python-client {hazelcast.__version__}"


def params(function: Any) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def test_the_private_invoke_the_sink_calls_is_there_with_its_signature() -> None:
    assert hasattr(Ringbuffer, "_invoke"), f"{VERSION}: Ringbuffer._invoke is gone; {WHERE}/sink.py calls it"
    assert params(Ringbuffer._invoke)[:2] == ["request", "response_handler"], (
        f"{VERSION}: Ringbuffer._invoke(request, response_handler) changed; {WHERE}/sink.py calls it so"
    )
    assert Ringbuffer._invoke is proxy_base.PartitionSpecificProxy._invoke, (
        f"{VERSION}: Ringbuffer no longer invokes on its partition through PartitionSpecificProxy._invoke"
    )


def test_add_all_itself_sends_its_request_through_invoke_with_the_codecs_decoder() -> None:
    source = inspect.getsource(Ringbuffer.add_all)
    assert "ringbuffer_add_all_codec.encode_request(" in source, f"{VERSION}: add_all encodes otherwise"
    assert "self._invoke(request, ringbuffer_add_all_codec.decode_response)" in source, (
        f"{VERSION}: add_all no longer sends through _invoke; {WHERE}/sink.py's call would differ from it"
    )
    assert params(add_all_codec.encode_request) == ["name", "value_list", "overflow_policy"], VERSION
    assert sink_module.MAX_BATCH == MAX_BATCH_SIZE, f"{VERSION}: add_all takes {MAX_BATCH_SIZE} values a call"


def test_the_frame_layout_the_sink_builds_is_the_clients() -> None:
    """A value's frame, and how an add_all request's value list ends, byte by byte."""
    value = Data(b"\x00\x00\x00\x00\xff\xff\xff\x7e" + b"\x00\x00\x00\x02{}")  # type: ignore[no-untyped-call]
    framed = bytearray()
    DataCodec.encode(framed, value)
    assert bytes(framed) == struct.pack("<iH", 6 + len(value.buffer), 0) + value.buffer, (
        f"{VERSION}: a Data frame is no longer <length incl. 6-byte header, LE int><flags 0> value; "
        f"{WHERE}/values.py frames values so"
    )
    ended = bytearray()
    ListMultiFrameCodec.encode(ended, [], DataCodec.encode, True)
    assert bytes(ended) == bytes(BEGIN_FRAME_BUF + END_FINAL_FRAME_BUF), VERSION
    empty = add_all_codec.encode_request("rb", [], OVERFLOW_POLICY_OVERWRITE)
    assert isinstance(empty, OutboundMessage) and isinstance(empty.buf, bytearray), VERSION
    assert bytes(empty.buf).endswith(bytes(BEGIN_FRAME_BUF + END_FINAL_FRAME_BUF)), (
        f"{VERSION}: an add_all request no longer ends with its value list; {WHERE}/values.py inserts the frames there"
    )
    assert (empty.retryable, empty.contains_data) == (False, True), VERSION


def test_a_json_value_serializes_as_json_data_builds_it_and_data_is_handed_on_as_it_is() -> None:
    assert JAVASCRIPT_JSON_SERIALIZATION_TYPE == -130, VERSION
    serialization = client_serialization()
    document = json_bytes(aggregate(1, 1, unit="温"))
    theirs = serialization.to_data(HazelcastJsonValue(document.decode()))
    assert bytes(theirs.buffer) == bytes(json_data(document).buffer), f"{VERSION}: HazelcastJsonValue's form changed"
    ours = json_data(document)
    assert serialization.to_data(ours) is ours, f"{VERSION}: to_data no longer passes a Data through"


class _Invocations:
    """The invocation service of a proxy with no cluster: keeps each invocation, answers it."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def invoke(self, invocation: Any) -> None:
        self.sent.append(invocation)
        invocation.future.set_result(invocation.response_handler(_answer(41)))


def _answer(sequence: int) -> Any:
    """A decoded response's initial frame holding ``sequence`` where the codec reads it."""
    buf = bytearray(RESPONSE_HEADER_SIZE + 8)
    struct.pack_into("<q", buf, RESPONSE_HEADER_SIZE, sequence)
    return SimpleNamespace(next_frame=lambda: SimpleNamespace(buf=buf))


def _ringbuffer(name: str, invocations: _Invocations) -> Ringbuffer[Any]:
    serialization = client_serialization()
    context = SimpleNamespace(
        invocation_service=invocations,
        partition_service=SimpleNamespace(get_partition_id=lambda _key: 7),
        serialization_service=serialization,
        listener_service=SimpleNamespace(register_listener=None, deregister_listener=None),
        config=SimpleNamespace(smart_routing=True),
        compact_schema_service=SimpleNamespace(send_schema_and_retry=None),
    )
    return Ringbuffer("hz:impl:ringbufferService", name, context)


@pytest.mark.parametrize("policy", [OVERFLOW_POLICY_OVERWRITE, OVERFLOW_POLICY_FAIL])
async def test_what_the_sink_sends_through_invoke_is_what_add_all_sends(policy: int) -> None:
    """The whole path: the client's ``add_all`` of the values and the sink's ``_invoke`` of its
    framed request reach the invocation service as the same request, on the same partition, and
    read the same answer back."""
    documents = [json_bytes(aggregate(n, n, unit="°C" * (n % 3))) for n in range(5)]
    invocations = _Invocations()
    proxy = _ringbuffer("temperature_aggregates", invocations)
    theirs = await proxy.add_all([HazelcastJsonValue(d.decode()) for d in documents], policy)
    request = add_all_json_request(proxy.name, documents, policy)
    ours = await proxy._invoke(request, add_all_codec.decode_response)
    assert asyncio.isfuture(invocations.sent[1].future), VERSION
    client, sink = invocations.sent
    assert ours == theirs == 41
    assert bytes(sink.request.buf) == bytes(client.request.buf), f"{VERSION}: add_all's request differs from ours"
    assert sink.partition_id == client.partition_id == 7
    assert sink.response_handler is client.response_handler is add_all_codec.decode_response, VERSION
