"""Readings of simulated devices, and the faults real fleets show.

Each (device, metric) stream has its own :class:`FaultInjector`: it turns one reading
into zero, one or two :class:`Emission` s. The draws come from the simulation's seeded
random generator in a fixed order, so a seed reproduces the same faults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from fluxgate_sim.signals import Signal


@dataclass(frozen=True, slots=True)
class Reading:
    """One value of one metric of one device, stamped by the device."""

    device: str
    metric: str
    value: float
    timestamp_ms: int
    seq: int


@dataclass(frozen=True, slots=True)
class Faults:
    """Fractions (0..1) of readings that are sent out of order, late, twice or broken."""

    out_of_order: float = 0.0
    late: float = 0.0
    duplicates: float = 0.0
    malformed: float = 0.0
    late_by_ms: int = 5 * 60 * 1000

    def __post_init__(self) -> None:
        for name in ("out_of_order", "late", "duplicates", "malformed"):
            fraction = getattr(self, name)
            if not 0.0 <= fraction <= 1.0:
                raise ValueError(f"{name} must be a fraction between 0 and 1, got {fraction}")
        if self.late_by_ms < 0:
            raise ValueError("late_by_ms must not be negative")


@dataclass(frozen=True, slots=True)
class Emission:
    """What a device actually sends: a reading, possibly as a broken payload."""

    reading: Reading
    malformed: bool = False
    kind: str = "ok"  # ok | late | out_of_order | duplicate | malformed: for the run's summary


class FaultInjector:
    """Applies :class:`Faults` to one stream of readings."""

    def __init__(self, faults: Faults, rng: random.Random) -> None:
        self._faults = faults
        self._rng = rng
        self._held: Reading | None = None

    def apply(self, reading: Reading) -> list[Emission]:
        """The emissions for ``reading`` (empty when it is held back to arrive out of order)."""
        emissions, self._held = apply_faults(self._faults, self._rng, reading, self._held)
        return emissions

    def flush(self) -> list[Emission]:
        """What is still held back, at the end of a run."""
        return self._release()

    def _release(self) -> list[Emission]:
        held, self._held = self._held, None
        return released(held)


def apply_faults(
    faults: Faults, rng: random.Random, reading: Reading, held: Reading | None
) -> tuple[list[Emission], Reading | None]:
    """The emissions for ``reading`` of a stream that holds ``held`` back, and what it holds
    back afterwards: the one fault rule, shared by a :class:`FaultInjector` (which keeps its
    held reading itself) and the fleet (which keeps a million streams' in one dict)."""
    # Draw all four every time so one fault's fraction never shifts another's sequence.
    draws = [rng.random() for _ in range(4)]
    if draws[0] < faults.malformed:
        return [Emission(reading, malformed=True, kind="malformed")], held
    kind = "ok"
    if draws[1] < faults.late:
        reading = replace(reading, timestamp_ms=reading.timestamp_ms - faults.late_by_ms)
        kind = "late"
    if draws[2] < faults.out_of_order and held is None:
        return [], reading
    out = [Emission(reading, kind=kind)]
    if draws[3] < faults.duplicates:
        out.append(Emission(reading, kind="duplicate"))
    return out + released(held), None


def released(held: Reading | None) -> list[Emission]:
    """A held reading goes out after a newer one: its event time is now out of order."""
    return [] if held is None else [Emission(held, kind="out_of_order")]


class Device:
    """A simulated device: one signal, one sequence and one fault injector per metric."""

    def __init__(
        self, name: str, metrics: tuple[str, ...], rng: random.Random, faults: Faults, day_seconds: float = 86_400.0
    ) -> None:
        self.name = name
        self.metrics = metrics
        self._signals = {metric: Signal(metric, rng, day_seconds) for metric in metrics}
        self._injectors = {metric: FaultInjector(faults, rng) for metric in metrics}
        self._seq = 0

    def tick(self, elapsed_s: float, now_ms: int) -> list[Emission]:
        """One reading of every metric, after faults."""
        emissions: list[Emission] = []
        for metric in self.metrics:
            self._seq += 1
            reading = Reading(self.name, metric, self._signals[metric].value_at(elapsed_s), now_ms, self._seq)
            emissions.extend(self._injectors[metric].apply(reading))
        return emissions

    def flush(self) -> list[Emission]:
        return [emission for injector in self._injectors.values() for emission in injector.flush()]
