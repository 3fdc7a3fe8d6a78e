"""Value generators: plausible ranges, drift and daily cycle, reproducible with a seed."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from fluxgate_sim.signals import Signal


def series(metric: str, seed: int, n: int = 2000, day: float = 600.0) -> list[float]:
    signal = Signal(metric, random.Random(seed), day_seconds=day)
    return [signal.value_at(i * 1.0) for i in range(n)]


@pytest.mark.parametrize(
    ("metric", "low", "high"), [("temperature", 5.0, 40.0), ("humidity", 0.0, 100.0), ("brightness", 0.0, 2000.0)]
)
def test_values_stay_in_plausible_ranges(metric: str, low: float, high: float) -> None:
    for seed in range(5):
        values = series(metric, seed)
        assert low <= min(values) and max(values) <= high, metric


def test_temperature_follows_a_daily_cycle_with_noise() -> None:
    values = series("temperature", 3, n=600, day=600.0)
    # One full day: the swing is the sine's (±4 °C), far above the noise.
    assert 4.0 < max(values) - min(values) < 15.0
    steps = [abs(b - a) for a, b in itertools.pairwise(values)]
    assert statistics.mean(steps) < 0.5  # slow: neighbouring readings are close
    assert len(set(values)) > 100  # and not constant


def test_same_seed_same_values_other_seed_other_values() -> None:
    assert series("humidity", 11) == series("humidity", 11)
    assert series("humidity", 11) != series("humidity", 12)


def test_values_are_rounded_like_real_sensors() -> None:
    assert all(round(v, 2) == v for v in series("temperature", 1, n=100))
    assert all(float(int(v)) == v for v in series("brightness", 1, n=100))


def test_unknown_metric() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        Signal("pressure", random.Random(0))
