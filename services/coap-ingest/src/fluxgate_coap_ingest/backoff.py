"""Exponential backoff with a cap and jitter, for re-registering observations.

Jitter matters here: when a CoAP server restarts, every observation on it ends at the
same moment; without jitter all of them would re-register in lock-step, again and again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays ``initial * multiplier**n`` capped at ``maximum``, minus up to ``jitter`` of it."""

    initial: float
    maximum: float
    multiplier: float = 2.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        if self.multiplier < 1 or not 0 <= self.jitter <= 1:
            raise ValueError("backoff needs multiplier >= 1 and 0 <= jitter <= 1")

    def ceiling(self, attempt: int) -> float:
        """The delay before attempt ``attempt`` (0-based) without jitter."""
        # min() before the power would overflow for huge attempt counts; cap the exponent.
        exponent = min(attempt, 64)
        return float(min(self.maximum, self.initial * self.multiplier**exponent))

    def next_delay(self) -> float:
        """The delay to wait now; each call counts one more failed attempt."""
        ceiling = self.ceiling(self.attempts)
        self.attempts += 1
        return ceiling * (1.0 - self.jitter * self.rng.random())

    def reset(self) -> None:
        """A registration succeeded: the next failure starts from ``initial`` again."""
        self.attempts = 0
