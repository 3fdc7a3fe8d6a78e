"""A fleet reporting once a second through gateways that stamp each reading on receipt (50 ms
after it was made), some devices with clocks that are wrong, cut into the batches a 5-second
trigger would make: the input of decision 0011's tests, on the reference model and the job."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from routing_model import Outputs, Reading

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SIZE, DELAY = 10_000, 5_000
TRANSIT = 50  # ms from a device to its gateway
TRIGGER = 5_000


def fleet(devices: int, seconds: int, skews: dict[str, int] | None = None, silent_after: dict[str, int] | None = None,
          ) -> list[Reading]:  # fmt: skip
    """Every device's readings in arrival order; ``skews``: how far a device's clock is off."""
    readings = []
    for second in range(seconds):
        for number in range(devices):
            device = f"d{number:03}"
            if second >= (silent_after or {}).get(device, seconds):
                continue
            made = T0 + second * 1000 + number  # devices a millisecond apart
            readings.append(
                Reading(device, made + (skews or {}).get(device, 0), 20.0 + second % 7 + number / 100,
                        ingest_ms=made + TRANSIT)
            )  # fmt: skip
    return readings


def batches(readings: Sequence[Reading]) -> list[list[Reading]]:
    """Cut by arrival time, one batch per trigger interval."""
    cut: dict[int, list[Reading]] = {}
    for reading in readings:
        cut.setdefault((reading.received_ms - T0) // TRIGGER, []).append(reading)
    return [cut[key] for key in sorted(cut)]


def outcome(outputs: Iterable[Outputs], devices: set[str]) -> tuple[dict[object, object], list[object]]:
    """The aggregates and late readings of ``devices`` only."""
    aggregates = {key: value for out in outputs for key, value in out.aggregates.items() if key[0] in devices}
    late = [identity for out in outputs for identity in out.late if identity[0] in devices]
    return aggregates, late


def others(devices: int, wrong: Iterable[str]) -> set[str]:
    return {f"d{n:03}" for n in range(devices)} - set(wrong)


SKEWED = {"d007": HOUR, "d042": -3 * HOUR}  # 1 % of the fleet hours ahead, 1 % hours behind
