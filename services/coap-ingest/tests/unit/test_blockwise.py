"""Block-wise notifications assembled with a bound, against an in-memory CoAP peer."""

from __future__ import annotations

import asyncio
from typing import Any

import aiocoap
import pytest

from fluxgate_coap_ingest.blockwise import BlockMismatch, assemble

URI = "coap://127.0.0.1:5683/big"
SZX = 6  # 1024-byte blocks


def block(number: int, payload: bytes, more: bool, etag: bytes = b"s1") -> aiocoap.Message:
    return aiocoap.Message(code=aiocoap.CONTENT, payload=payload, block2=(number, more, SZX), etag=etag)


class BlockServer:
    """Answers block requests from ``state`` (None: never-ending); ``etags`` per request, if set."""

    def __init__(self, state: bytes | None, etags: list[bytes] | None = None) -> None:
        self.state, self.etags, self.asked = state, etags, []

    def request(self, message: aiocoap.Message, **options: Any) -> Any:
        assert options == {"handle_blockwise": False}
        number = message.opt.block2.block_number
        self.asked.append(number)
        etag = self.etags[len(self.asked) - 1] if self.etags else b"s1"
        if self.state is None:
            answer = block(number, b"x" * 1024, more=True, etag=etag)
        else:
            chunk = self.state[number * 1024 : (number + 1) * 1024]
            answer = block(number, chunk, more=(number + 1) * 1024 < len(self.state), etag=etag)
        response: asyncio.Future[aiocoap.Message] = asyncio.get_running_loop().create_future()
        response.set_result(answer)
        return type("Request", (), {"response": response})()


async def test_a_notification_in_one_message_is_as_it_came() -> None:
    first = aiocoap.Message(code=aiocoap.CONTENT, payload=b"21.5")
    assembled = await assemble(BlockServer(b""), URI, first, 4096, 1.0)
    assert (assembled.payload, assembled.abandoned) == (b"21.5", False)


async def test_the_other_blocks_are_fetched_in_order() -> None:
    state = bytes(range(256)) * 10  # 2560 bytes: 3 blocks
    server = BlockServer(state)
    assembled = await assemble(server, URI, block(0, state[:1024], more=True), 4096, 1.0)
    assert (assembled.payload, assembled.abandoned) == (state, False)
    assert server.asked == [1, 2]


async def test_a_transfer_that_never_ends_is_abandoned_at_the_bound() -> None:
    server = BlockServer(None)
    assembled = await assemble(server, URI, block(0, b"x" * 1024, more=True), 8192, 1.0)
    assert (len(assembled.payload), assembled.abandoned) == (8192, True)
    assert server.asked == list(range(1, 8))


async def test_a_block_of_another_state_drops_the_notification() -> None:
    state = b"y" * 3000
    server = BlockServer(state, etags=[b"s1", b"s2"])
    with pytest.raises(BlockMismatch, match="ETag"):
        await assemble(server, URI, block(0, state[:1024], more=True), 8192, 1.0)
