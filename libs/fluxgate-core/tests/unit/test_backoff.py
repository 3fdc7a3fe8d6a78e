"""Retry delays: exponential, capped, jittered, reset after success; waits that end on stop."""

from __future__ import annotations

import asyncio
import random

import pytest

from fluxgate_core.backoff import Backoff, sleep_unless


def test_schedule_without_jitter_doubles_up_to_the_cap() -> None:
    backoff = Backoff(initial=0.5, maximum=5.0, multiplier=2.0, jitter=0.0)
    assert [backoff.next_delay() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_reset_starts_again_from_initial() -> None:
    backoff = Backoff(initial=1.0, maximum=60.0, jitter=0.0)
    for _ in range(4):
        backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 1.0


def test_jitter_stays_within_its_fraction_and_spreads_delays() -> None:
    backoff = Backoff(initial=1.0, maximum=8.0, jitter=0.5, rng=random.Random(1))
    delays = []
    for _ in range(200):
        backoff.reset()
        delays.append(backoff.next_delay())
    assert all(0.5 <= delay <= 1.0 for delay in delays)
    assert max(delays) - min(delays) > 0.3  # restarting observers do not re-register in lock-step


def test_same_seed_same_schedule() -> None:
    first = Backoff(0.5, 30.0, rng=random.Random(7))
    second = Backoff(0.5, 30.0, rng=random.Random(7))
    assert [first.next_delay() for _ in range(10)] == [second.next_delay() for _ in range(10)]


def test_huge_attempt_counts_stay_at_the_cap() -> None:
    assert Backoff(0.5, 30.0).ceiling(10_000) == 30.0


@pytest.mark.parametrize(
    ("initial", "maximum", "multiplier", "jitter"), [(0, 1, 2, 0), (2, 1, 2, 0), (1, 2, 0.5, 0), (1, 2, 2, 1.5)]
)
def test_invalid_parameters(initial: float, maximum: float, multiplier: float, jitter: float) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(initial, maximum, multiplier, jitter)


def test_delay_of_an_attempt_is_jittered_below_its_ceiling_and_counts_nothing() -> None:
    backoff = Backoff(initial=1.0, maximum=8.0, rng=random.Random(3))  # jitter 0.5: within [ceiling/2, ceiling]
    for attempt, ceiling in enumerate([1, 2, 4, 8, 8, 8]):
        assert ceiling / 2 <= backoff.delay(attempt) <= ceiling
    assert backoff.attempts == 0


def test_capped_lets_a_maximum_below_initial_win() -> None:
    backoff = Backoff.capped(5.0, 2.0)
    assert [backoff.ceiling(attempt) for attempt in range(3)] == [2.0, 2.0, 2.0]
    assert Backoff.capped(1.0, 8.0).ceiling(2) == 4.0


async def test_sleep_unless_ends_early_when_stopped() -> None:
    stop = asyncio.Event()
    assert await sleep_unless(stop, 0.01) is False
    stop.set()
    assert await sleep_unless(stop, 60.0) is True
