"""Exponential backoff with jitter, and waits that end early when the service is told to stop."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """``first * 2**attempt`` capped at ``cap`` seconds, times a random factor in [0.5, 1] so
    persisters that lost the store together do not all come back in the same instant."""

    first: float
    cap: float

    def delay(self, attempt: int) -> float:
        return float(min(self.cap, self.first * 2 ** min(attempt, 32)) * random.uniform(0.5, 1.0))


async def sleep_unless(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``; return True if ``stop`` was set meanwhile (the wait ended early)."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True
