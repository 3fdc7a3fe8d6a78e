"""Large notifications against the real coap-ingest process (issue 9): served block-wise
(RFC 7959) by the simulator, over the payload limit and over what is fetched of one, and
one sent whole in a single datagram by a plain aiocoap server."""

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
from coap_payloads import T0
from fluxgate_testing import consume, free_port

from fluxgate_coap_ingest.blockwise import ASSEMBLY_LIMIT_FACTOR
from fluxgate_core import deadletter
from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.limits import DEFAULT_HEAD_BYTES
from fluxgate_core.serde import AvroDecoder
from fluxgate_sim.coap import CoapDeviceServer

pytestmark = pytest.mark.integration
BLOCK_BYTES = 1024  # aiocoap's block size over UDP: the payloads below take hundreds of blocks
LIMIT = 64 * 1024  # the payload limit here: a quarter of the default, for a quarter of the blocks


def payload(device: str, value: float, timestamp: int, note_bytes: int = 0) -> bytes:
    body = {"sensorId": device, "timestamp": timestamp, "temperature": value}
    if note_bytes:  # text lz4 cannot shrink
        body["note"] = base64.b64encode(os.urandom(note_bytes * 3 // 4)).decode()
    return json.dumps(body).encode()


def assert_bounded(letter: ConsumedRecord, whole: bytes, source: str, size: int, error_class: bytes) -> None:
    """A bounded dead letter of ``whole``, whose first ``size`` bytes were known."""
    assert letter.value == whole[:DEFAULT_HEAD_BYTES]
    assert letter.header(deadletter.TRUNCATED) == b"true"
    assert letter.header(deadletter.PAYLOAD_SIZE) == str(size).encode()
    assert letter.header(deadletter.PAYLOAD_SHA256) == hashlib.sha256(whole[:size]).hexdigest().encode()
    assert letter.header(deadletter.SOURCE) == source.encode()
    assert letter.header(deadletter.SERVICE) == b"coap-ingest"
    assert letter.header(deadletter.ERROR_CLASS) == error_class
    assert letter.header("coap.content-format") == b"50"


async def test_block_wise_notifications_over_the_limit_are_dead_lettered_bounded(
    stack: Any, topics: tuple[str, str], decoder: AvroDecoder, start_ingest: Callable[..., Any]
) -> None:
    readings_topic, dead_letter_topic = topics
    fetched = ASSEMBLY_LIMIT_FACTOR * LIMIT  # what is fetched of one notification
    big = payload("dev-big", 20.5, T0 + 1000, note_bytes=LIMIT)  # over the limit
    huge = payload("dev-huge", 30.5, T0 + 1000, note_bytes=fetched + 64 * BLOCK_BYTES)  # over what is fetched
    async with CoapDeviceServer(port=0) as server:
        for device in ("dev-big", "dev-huge"):
            server.publish(device, "temperature", payload(device, 20.0, T0))
        ingest = start_ingest(server.resources_config(), READINESS="all", LIMITS__MAX_PAYLOAD_BYTES=str(LIMIT))
        await asyncio.to_thread(ingest.wait_ready)
        server.publish("dev-big", "temperature", big)
        server.publish("dev-huge", "temperature", huge)
        # Observe carries state: the next update waits until the large ones are handled, or
        # the server would serve the rest of their blocks from a newer state.
        dead = await asyncio.to_thread(consume, stack.bootstrap, dead_letter_topic, expected=2, idle=0, timeout=30)
        server.publish("dev-big", "temperature", payload("dev-big", 21.0, T0 + 2000))
        records = await asyncio.to_thread(
            consume, stack.bootstrap, readings_topic, expected=3, idle=0, timeout=30, decoder=decoder
        )
        assert ingest.running, ingest.log_tail()
        assert await asyncio.to_thread(ingest.terminate) == 0
    values = sorted((r.record["device_id"], r.record["value"]) for r in records if r.record)
    assert values == [("dev-big", 20.0), ("dev-big", 21.0), ("dev-huge", 20.0)]
    letters = {letter.key: letter for letter in dead}
    assert sorted(letters) == [b"dev-big", b"dev-huge"]
    assert_bounded(letters[b"dev-big"], big, server.uri("dev-big", "temperature"), len(big), b"PayloadTooLarge")
    reason = letters[b"dev-big"].header(deadletter.REASON)
    assert f"over the limit of {LIMIT} bytes".encode() in reason
    assert_bounded(letters[b"dev-huge"], huge, server.uri("dev-huge", "temperature"), fetched, b"TransferAbandoned")
    assert b"abandoned" in letters[b"dev-huge"].header(deadletter.REASON)


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
