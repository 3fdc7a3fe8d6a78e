"""Large notifications against the real coap-ingest process (issue 9): one over the limit,
served block-wise (RFC 7959) by the simulator, and one sent whole in a single datagram by
a plain aiocoap server."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
from collections.abc import Callable
from typing import Any

import aiocoap
import aiocoap.resource as coap_resource
import pytest

from fluxgate_core import deadletter
from fluxgate_core.limits import DEFAULT_HEAD_BYTES, DEFAULT_MAX_PAYLOAD_BYTES
from fluxgate_core.serde import AvroDecoder
from fluxgate_core.testing import consume, free_port
from fluxgate_sim.coap import CoapDeviceServer

pytestmark = pytest.mark.integration
T0 = 1_700_000_000_000
BLOCK_BYTES = 1024  # aiocoap's block size over UDP: the payload below takes hundreds of blocks


def payload(value: float, timestamp: int, note: str = "") -> bytes:
    body = {"sensorId": "dev-big", "timestamp": timestamp, "temperature": value}
    return json.dumps({**body, "note": note} if note else body).encode()


async def test_a_block_wise_notification_over_the_limit_is_dead_lettered_bounded(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    readings_topic, dead_letter_topic = topics
    # Text lz4 cannot shrink, a little over the default limit.
    note = base64.b64encode(os.urandom(DEFAULT_MAX_PAYLOAD_BYTES * 3 // 4 + BLOCK_BYTES)).decode()
    big = payload(20.5, T0 + 1000, note)
    assert len(big) > DEFAULT_MAX_PAYLOAD_BYTES
    async with CoapDeviceServer(port=0) as server:
        server.publish("dev-big", "temperature", payload(20.0, T0))
        ingest = start_ingest(server.resources_config())
        await asyncio.to_thread(ingest.wait_ready)
        server.publish("dev-big", "temperature", big)
        # Observe carries state: the next update waits until the big one is handled, or the
        # server would serve the rest of its blocks from a newer state.
        (letter,) = await asyncio.to_thread(consume, stack.bootstrap, dead_letter_topic, expected=1, idle=0, timeout=30)
        server.publish("dev-big", "temperature", payload(21.0, T0 + 2000))
        records = await asyncio.to_thread(
            consume, stack.bootstrap, readings_topic, expected=2, idle=0, timeout=30, decoder=decoder
        )
        assert ingest.running, ingest.log_tail()
        assert await asyncio.to_thread(ingest.terminate) == 0
    assert [r.record["value"] for r in records if r.record] == [20.0, 21.0]
    assert letter.value == big[:DEFAULT_HEAD_BYTES]
    assert letter.header(deadletter.TRUNCATED) == b"true"
    assert letter.header(deadletter.PAYLOAD_SIZE) == str(len(big)).encode()
    assert letter.header(deadletter.PAYLOAD_SHA256) == hashlib.sha256(big).hexdigest().encode()
    assert letter.header(deadletter.SOURCE) == server.uri("dev-big", "temperature").encode()
    assert letter.header(deadletter.SERVICE) == b"coap-ingest"
    assert letter.header(deadletter.ERROR_CLASS) == b"PayloadTooLarge"
    assert f"over the limit of {DEFAULT_MAX_PAYLOAD_BYTES} bytes".encode() in letter.header(deadletter.REASON)
    assert letter.header("coap.content-format") == b"50"
    assert letter.key == b"dev-big"


class WholeResource(coap_resource.ObservableResource):  # type: ignore[misc]  # aiocoap ships no types
    """What stock aiocoap serves: every answer in one datagram, however large."""

    def __init__(self, payload: bytes) -> None:
        super().__init__()
        self.payload = payload

    async def render_get(self, request: aiocoap.Message) -> aiocoap.Message:
        return aiocoap.Message(code=aiocoap.CONTENT, payload=self.payload, content_format=110)


async def test_a_notification_in_one_datagram_over_4_kib_arrives_whole(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    readings_topic, _ = topics
    # A SenML pack of 100 readings, about 5 KiB: aiocoap read datagrams into 4 KiB and
    # ignored MSG_TRUNC, so this arrived cut short and was parsed as if whole.
    pack = [{"bn": "dev-whole:", "bt": T0 / 1000, "n": "temperature", "v": 20.0}]
    pack += [{"n": "temperature", "t": step, "v": 20.0 + step / 100} for step in range(1, 100)]
    body = json.dumps(pack).encode()
    assert 4096 < len(body) < 8192
    site = coap_resource.Site()
    site.add_resource(("pack",), WholeResource(body))
    port = free_port(socket.SOCK_DGRAM)
    server = await aiocoap.Context.create_server_context(site, bind=("127.0.0.1", port), transports=["udp6"])
    try:
        ingest = start_ingest([{"uri": f"coap://127.0.0.1:{port}/pack"}])
        records = await asyncio.to_thread(
            consume, stack.bootstrap, readings_topic, expected=100, idle=0, timeout=30, decoder=decoder
        )
        assert await asyncio.to_thread(ingest.terminate) == 0
    finally:
        await server.shutdown()
    assert [r.record["value"] for r in records if r.record] == [20.0 + step / 100 for step in range(100)]
