"""Two instances split the partitions; either answers for any device (faust forwards)."""

from __future__ import annotations

import pytest

from fluxgate_core.testing import ServiceProcess

from .conftest import Fleet, device, devices

pytestmark = pytest.mark.integration
DEVICES = [f"dev-{i}" for i in range(9)]


def test_two_instances_split_the_partitions_and_either_answers_for_any_device(fleet: Fleet) -> None:
    with fleet.service() as first, fleet.service() as second:
        start_split(fleet, first, second)
        for device_id in DEVICES:
            for instance in (first, second):
                status, state = device(instance, device_id)
                assert (status, state["device_id"], state["readings"]) == (200, device_id, 1)
        assert [d["device_id"] for d in devices(second)] == sorted(DEVICES)
        assert first.terminate() == 0 and second.terminate() == 0


def start_split(fleet: Fleet, first: ServiceProcess, second: ServiceProcess) -> None:
    """Both instances up, every one of ``DEVICES`` read, the partitions split between the two."""
    first.start()
    for device_id in DEVICES:
        fleet.send(device_id)
    first.wait_until(lambda: len(devices(first)) == len(DEVICES), "every device in the table")
    second.start()

    def split() -> bool:
        own = [len(devices(instance, "?local=1")) for instance in (first, second)]
        return sum(own) == len(DEVICES) and min(own) > 0

    second.wait_until(split, "the partitions split between the two", 60)
