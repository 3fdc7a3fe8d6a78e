"""Exponential backoff with a cap and jitter, and waits that end early when told to stop.

One class for every retry loop: the sink runtime's write retries and store outages, the MQTT
proxy's (re)connects, the CoAP observers' re-registrations. Jitter matters to all of them:
replicas that lost the same server at the same moment must not all come back in lock-step.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

# A bigger exponent only overflows: ``initial * multiplier**64`` is past any cap worth having.
_MAX_EXPONENT = 64


@dataclass
class Backoff:
    """Delays ``initial * multiplier**n`` capped at ``maximum``, minus up to ``jitter`` of it.

    Either ask for the delay of a given attempt (:meth:`delay`), or let the backoff count
    failures itself (:meth:`next_delay`, :meth:`reset` after a success).
    """

    initial: float
    maximum: float
    multiplier: float = 2.0
    jitter: float = 0.5
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        if self.multiplier < 1 or not 0 <= self.jitter <= 1:
            raise ValueError("backoff needs multiplier >= 1 and 0 <= jitter <= 1")

    @classmethod
    def capped(cls, initial: float, maximum: float) -> Backoff:
        """Doubling, half-jittered delays where a ``maximum`` below ``initial`` wins (every delay
        is then ``maximum``), for settings that do not forbid it."""
        return cls(min(initial, maximum), maximum)

    def ceiling(self, attempt: int) -> float:
        """The delay before attempt ``attempt`` (0-based) without jitter."""
        return float(min(self.maximum, self.initial * self.multiplier ** min(attempt, _MAX_EXPONENT)))

    def delay(self, attempt: int) -> float:
        """The jittered delay before attempt ``attempt`` (0-based); counts nothing."""
        return self.ceiling(attempt) * (1.0 - self.jitter * self.rng.random())

    def next_delay(self) -> float:
        """The delay to wait now; each call counts one more failed attempt."""
        delay = self.delay(self.attempts)
        self.attempts += 1
        return delay

    def reset(self) -> None:
        """An attempt succeeded: the next failure starts from ``initial`` again."""
        self.attempts = 0


async def sleep_unless(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``; return True if ``stop`` was set meanwhile (the wait ended early)."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True
