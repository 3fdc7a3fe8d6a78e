"""Fault injection: requested fractions, exact shapes of each fault, determinism."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from fluxgate_sim.faults import Device, Emission, FaultInjector, Faults, Reading

N = 5000


def run(faults: Faults, seed: int = 1, n: int = N) -> list[Emission]:
    injector = FaultInjector(faults, random.Random(seed))
    out: list[Emission] = []
    for i in range(n):
        out.extend(injector.apply(Reading("d", "temperature", 20.0 + i / 1000, 1_700_000_000_000 + i * 1000, i + 1)))
    return out + injector.flush()


def test_no_faults_is_the_identity() -> None:
    emissions = run(Faults())
    assert [e.reading.seq for e in emissions] == list(range(1, N + 1))
    assert all(e.kind == "ok" and not e.malformed for e in emissions)


@pytest.mark.parametrize("fraction", [0.05, 0.2, 0.5])
def test_malformed_fraction(fraction: float) -> None:
    kinds = Counter(e.kind for e in run(Faults(malformed=fraction)))
    assert kinds["malformed"] / N == pytest.approx(fraction, abs=0.03)
    assert kinds["malformed"] + kinds["ok"] == N


@pytest.mark.parametrize("fraction", [0.1, 0.3])
def test_duplicates_fraction_sends_the_same_reading_twice(fraction: float) -> None:
    emissions = run(Faults(duplicates=fraction))
    duplicates = [i for i, e in enumerate(emissions) if e.kind == "duplicate"]
    assert len(duplicates) / N == pytest.approx(fraction, abs=0.03)
    assert all(emissions[i].reading == emissions[i - 1].reading for i in duplicates)
    assert len(emissions) == N + len(duplicates)


def test_late_readings_are_stamped_in_the_past() -> None:
    emissions = run(Faults(late=0.1, late_by_ms=300_000))
    late = [e for e in emissions if e.kind == "late"]
    assert len(late) / N == pytest.approx(0.1, abs=0.03)
    assert all(e.reading.timestamp_ms == 1_700_000_000_000 + (e.reading.seq - 1) * 1000 - 300_000 for e in late)


def test_out_of_order_readings_arrive_after_a_newer_one() -> None:
    emissions = run(Faults(out_of_order=0.2))
    assert sorted(e.reading.seq for e in emissions) == list(range(1, N + 1))  # nothing lost or added
    swapped = [i for i, e in enumerate(emissions) if e.kind == "out_of_order"]
    assert len(swapped) / N == pytest.approx(0.2 * 0.8, abs=0.05)  # held back only when none is held
    assert all(emissions[i].reading.timestamp_ms < emissions[i - 1].reading.timestamp_ms for i in swapped)


def test_same_seed_same_faults() -> None:
    faults = Faults(out_of_order=0.1, late=0.1, duplicates=0.1, malformed=0.1)
    assert run(faults, seed=5) == run(faults, seed=5)
    assert run(faults, seed=5) != run(faults, seed=6)


@pytest.mark.parametrize("field", ["out_of_order", "late", "duplicates", "malformed"])
def test_fractions_are_checked(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Faults(**{field: 1.5})


def test_device_ticks_every_metric_with_increasing_sequence() -> None:
    device = Device("dev", ("temperature", "humidity"), random.Random(0), Faults())
    first = device.tick(0.0, 1_700_000_000_000)
    second = device.tick(1.0, 1_700_000_001_000)
    assert [(e.reading.metric, e.reading.seq) for e in first + second] == [
        ("temperature", 1),
        ("humidity", 2),
        ("temperature", 3),
        ("humidity", 4),
    ]
    assert device.flush() == []
