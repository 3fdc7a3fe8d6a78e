"""Plausible sensor values: a daily-ish sine, a slow random-walk drift and noise.

Every device gets its own signal per metric, drawn from one seeded ``random.Random``,
so the same ``--seed`` gives the same values on every run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

METRICS = ("temperature", "humidity", "brightness")
UNITS = {"temperature": "Cel", "humidity": "%RH", "brightness": "lx"}


@dataclass(frozen=True)
class SignalShape:
    """How one metric behaves: centre, daily swing, drift, noise and physical bounds."""

    base: float
    base_spread: float
    amplitude: float
    drift_step: float
    noise: float
    low: float
    high: float
    decimals: int


SHAPES = {
    "temperature": SignalShape(21.0, 3.0, 4.0, 0.02, 0.15, -40.0, 85.0, 2),
    "humidity": SignalShape(45.0, 10.0, 12.0, 0.05, 0.8, 0.0, 100.0, 1),
    "brightness": SignalShape(300.0, 100.0, 400.0, 1.0, 15.0, 0.0, 100_000.0, 0),
}


class Signal:
    """Values of one metric of one device over time (seconds since the simulation began)."""

    def __init__(self, metric: str, rng: random.Random, day_seconds: float = 86_400.0) -> None:
        if metric not in SHAPES:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
        self.metric = metric
        self.shape = SHAPES[metric]
        self._rng = rng
        self._day = day_seconds
        self._base = self.shape.base + rng.uniform(-self.shape.base_spread, self.shape.base_spread)
        self._phase = rng.uniform(0, 2 * math.pi)
        self._drift = 0.0

    def value_at(self, elapsed_s: float) -> float:
        """The next value; call in time order (the drift is a random walk over calls)."""
        shape = self.shape
        self._drift += self._rng.gauss(0.0, shape.drift_step)
        daily = shape.amplitude * math.sin(2 * math.pi * elapsed_s / self._day + self._phase)
        value = self._base + self._drift + daily + self._rng.gauss(0.0, shape.noise)
        return round(min(shape.high, max(shape.low, value)), shape.decimals)
