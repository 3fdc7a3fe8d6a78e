"""Block-wise notifications (RFC 7959) assembled here, with a bound, instead of by aiocoap.

aiocoap assembles a block-wise response by asking for block after block until the server
says there are no more, holding all of it in memory and setting no bound: a server that
never says so, or serves gigabytes, took coap-ingest's memory with it, before the payload
limit could look at anything. Here the blocks stop at ``max_bytes``: a notification with
more is handed on *abandoned*, with what was fetched, and becomes a bounded dead letter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiocoap
import structlog

from fluxgate_core.limits import PayloadTooLarge

log = structlog.get_logger(__name__)
# How much of a block-wise notification is fetched: over the payload limit (so the dead
# letter of a moderately large payload still names its full size and SHA-256), yet bounded.
ASSEMBLY_LIMIT_FACTOR = 4


class TransferAbandoned(PayloadTooLarge):
    """A block-wise notification had more than we fetch; only its first part is known."""

    @classmethod
    def after(cls, fetched: int) -> TransferAbandoned:
        return cls(
            f"block-wise payload over {fetched} bytes: its transfer was abandoned there "
            "(size and SHA-256 are of that part)"
        )


@dataclass(frozen=True, slots=True)
class Assembled:
    """A notification's payload; ``abandoned``: the server had more than the first ``len(payload)`` bytes."""

    payload: bytes
    abandoned: bool = False


class BlockMismatch(Exception):
    """A later block does not continue the first (another state, an error): the observer
    drops this notification; the newer state arrives as its own notification."""


async def assemble(context: Any, uri: str, first: aiocoap.Message, max_bytes: int, timeout: float) -> Assembled:
    """``first``'s whole payload, its other blocks requested one at a time (RFC 7959 §3.4),
    at most ``max_bytes`` of it. Raises TimeoutError, aiocoap errors and :class:`BlockMismatch`."""
    block = first.opt.block2
    payload = bytearray(first.payload)
    while block is not None and block.more:
        if len(payload) >= max_bytes:
            log.warning("notification.blockwise.abandoned", uri=uri, fetched=len(payload))
            return Assembled(bytes(payload[:max_bytes]), abandoned=True)
        number = len(payload) // block.size
        request = aiocoap.Message(code=aiocoap.GET, uri=uri, block2=(number, False, block.size_exponent))
        async with asyncio.timeout(timeout):
            response = await context.request(request, handle_blockwise=False).response
        block = response.opt.block2
        if not response.code.is_successful() or block is None or block.block_number != number:
            raise BlockMismatch(f"block {number} of {uri}: {response.code}, block2 {block}")
        if response.opt.etag != first.opt.etag:  # the state changed midway (RFC 7959 §2.4)
            raise BlockMismatch(f"block {number} of {uri} is of another state (ETag)")
        payload += response.payload
    return Assembled(bytes(payload))
