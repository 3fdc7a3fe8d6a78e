"""Two instances split the partitions; either answers for any device (faust forwards); when one
dies the other takes its devices over and judges their silence."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from fluxgate_testing import ServiceProcess
from prometheus_client.parser import text_string_to_metric_families

from .conftest import THRESHOLD_S, Fleet, device, devices, keep_sending, on_partition

# paired: faust's rebalances and standby take their time from timers. Beside the parallel
# phase's Spark jobs two CI runs missed a takeover or an OFFLINE within the tests' bounds; one
# miss was later found to be the standby test's own race (it counted before the takeover had
# restored), and whether load alone caused the other is not known.
pytestmark = [pytest.mark.integration, pytest.mark.paired]
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


def test_a_rebalance_reads_again_no_changelog_of_the_partitions_an_instance_keeps(fleet: Fleet) -> None:
    """The first instance owns every partition and writes every device's entry. When the second
    joins, the first keeps some partitions: it reads none of their changelog again (faust's
    memory store read every kept partition from its start, at each rebalance). The second reads
    the changelog of the partitions it takes, and both answer for every device."""
    with fleet.service() as first, fleet.service() as second:
        first.start()
        for device_id in DEVICES:
            fleet.send(device_id)
        first.wait_until(lambda: len(devices(first)) == len(DEVICES), "every device in the table")
        first.wait_until(lambda: fleet.changelog_records() >= len(DEVICES), "every entry in the changelog")
        assert applied(first) == 0  # a new table: nothing to restore
        second.start()
        for instance in (first, second):
            instance.wait_until(lambda: partitions(instance)["active"] != [0, 1, 2] and instance.ready(),  # noqa: B023
                                "the partitions split and restored", 60)  # fmt: skip
        kept, taken = (len(devices(instance, "?local=1")) for instance in (first, second))
        assert kept + taken == len(DEVICES) and min(kept, taken) > 0
        assert applied(first) == 0
        assert applied(second) >= taken  # at least each of its devices' entry
        for device_id in DEVICES:
            for instance in (first, second):
                assert device(instance, device_id)[1]["readings"] == 1
        assert first.terminate() == 0 and second.terminate() == 0


def applied(instance: ServiceProcess) -> float:
    """The changelog records the instance's restores and standbys applied to its table."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(instance.metrics())
        for sample in family.samples
        if sample.name == "fluxgate_status_changelog_applied_total"
    )


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


def test_when_an_instance_dies_the_other_takes_its_devices_over_and_judges_their_silence(fleet: Fleet) -> None:
    """SIGKILL one of two instances. Once the group has dropped it (session timeout), the
    survivor restores the dead one's partitions from the changelog: it answers for every device,
    a device of the dead one's that fell silent just before the kill turns OFFLINE (decided by
    the survivor), one that kept sending through the kill and the takeover never does, and no
    transition the dead instance already made is made again.

    The silence threshold is twice the other tests': the busy device must not fall silent
    because the test's own sender was starved of CPU on a loaded machine."""
    threshold = {"STATUS__SILENCE_THRESHOLD_S": str(2 * THRESHOLD_S)}
    with fleet.service(**threshold) as victim, fleet.service(**threshold) as survivor:
        start_split(fleet, victim, survivor)
        survivor.wait_until(lambda: not devices(survivor, "?status=ONLINE"), "the first devices OFFLINE", 30)
        taken_over = devices(victim, "?local=1")[0]["partition"]
        quiet, busy = (on_partition(taken_over, prefix) for prefix in ("quiet", "busy"))
        for device_id in (quiet, busy):
            fleet.send(device_id)
        # Killed once what a takeover restores is written: every device's ONLINE and OFFLINE, and
        # the two new devices' ONLINE.
        victim.wait_until(lambda: fleet.changelog_records() >= 2 * len(DEVICES) + 2, "the changelog written")

        stop_busy, sent_at = threading.Event(), [time.monotonic()]
        sender = threading.Thread(target=keep_sending, args=(fleet, busy, stop_busy, sent_at), daemon=True)
        sender.start()
        try:
            victim.kill()
            everyone = len(DEVICES) + 2
            survivor.wait_until(lambda: len(devices(survivor, "?local=1")) == everyone, "every device taken over", 60)
            survivor.wait_until(lambda: device(survivor, quiet)[1]["status"] == "OFFLINE", f"{quiet} OFFLINE", 30)
            assert device(survivor, busy)[1]["status"] == "ONLINE", f"longest pause between sends: {gap(sent_at)}"
        finally:
            stop_busy.set()
            sender.join()
        busy_stopped_ms = int(time.time() * 1000)

        for device_id in [*DEVICES, quiet]:
            status, state = device(survivor, device_id)
            assert (status, state["readings"], state["status"]) == (200, 1, "OFFLINE")
        assert device(survivor, busy)[1]["readings"] > 1
        by_device = transitions_by_device(fleet.transitions(expected=2 * len(DEVICES) + 3))
        made = {key: [(status, previous) for status, previous, _ in seen] for key, seen in by_device.items()}
        assert {device_id: made[device_id] for device_id in [*DEVICES, quiet]} == {
            device_id: [("ONLINE", None), ("OFFLINE", "ONLINE")] for device_id in [*DEVICES, quiet]
        }
        while_busy = [(status, previous) for status, previous, at in by_device[busy] if at < busy_stopped_ms]
        assert while_busy == [("ONLINE", None)], f"longest pause between sends: {gap(sent_at)}"
        assert survivor.terminate() == 0


def gap(sent_at: list[float]) -> str:
    """The longest pause in the busy device's sending, from the sender's start."""
    return f"{max((b - a for a, b in itertools.pairwise(sent_at)), default=0.0):.2f} s"


def transitions_by_device(records: list[dict[str, Any]]) -> dict[str, list[tuple[str, str | None, int]]]:
    """device id -> its transitions in order: (status, previous status, changed at in ms)."""
    out: dict[str, list[tuple[str, str | None, int]]] = defaultdict(list)
    for r in records:
        out[r["device_id"]].append((r["status"], r["previous_status"], int(r["changed_at"].timestamp() * 1000)))
    return out


def test_with_a_standby_replica_each_instance_keeps_the_others_devices_and_takes_them_over(fleet: Fleet) -> None:
    """``standby_replicas=1``: each instance stands by for the partitions the other owns, its
    copy holding every device the owner has (judged by nobody but the owner), and when the owner
    is killed the survivor answers for every device, each reading counted once: the devices that
    sent again since the copy began and the quiet ones, written only before it."""
    standby = {"STATUS__STANDBY_REPLICAS": "1"}
    with fleet.service(**standby) as victim, fleet.service(**standby) as survivor:
        start_split(fleet, victim, survivor)
        # A new standby lost the records of a fetch dropped at the end of the recovery (its copy
        # lacked the quiet devices: seen in 4 runs of 7 here); the seek after the drop now reads
        # them again (transport.py), the store keeps the copy (store.py), and the takeover reads
        # only what was written after it.
        for instance in (victim, survivor):
            instance.wait_until(instance.ready, "ready after the split", 60)
        again = DEVICES[::2]
        for device_id in again:
            fleet.send(device_id)
        expected = {device_id: 2 if device_id in again else 1 for device_id in DEVICES}

        def mirrored() -> bool:
            mine, theirs = partitions(survivor), partitions(victim)
            counted = {d["device_id"]: d["readings"] for d in devices(victim, "?local=1")}
            sent_again = sum(1 for device_id in counted if device_id in again)
            return (
                mine["standby"] == theirs["active"]
                and theirs["standby"] == mine["active"]
                and mine["devices"]["standby"] == theirs["devices"]["active"]
                and sent_again > 0
                and all(counted[device_id] == expected[device_id] for device_id in counted)
            )

        survivor.wait_until(mirrored, "each instance standing by for the other's partitions", 60)
        victim.kill()
        # Owning every partition is not having restored them: the copy is answered for from the
        # assignment on, and the readings it lacks (the owner's changelog writes still in its
        # producer's batch when it was killed) are counted once the input is read again.
        survivor.wait_until(lambda: caught_up(survivor, [0, 1, 2]), "every partition taken over and read", 60)
        assert partitions(survivor)["active"] == [0, 1, 2]
        counted = {d["device_id"]: d["readings"] for d in devices(survivor, "?local=1")}
        assert counted == expected
        assert survivor.terminate() == 0


def caught_up(instance: ServiceProcess, owned: list[int]) -> bool:
    """Ready (restored, not rebalancing), and every one of ``owned`` read to its end as of the
    last tick: its lag shown, and 0 (a partition not shown yet has no series)."""
    if not instance.ready():
        return False
    lags = {
        int(sample.labels["partition"]): sample.value
        for family in text_string_to_metric_families(instance.metrics())
        for sample in family.samples
        if sample.name == "fluxgate_status_consumer_lag"
    }
    return all(lags.get(partition) == 0 for partition in owned)


def partitions(instance: ServiceProcess) -> dict[str, Any]:
    status, body = instance.get("/partitions")
    assert status == 200, body
    found: dict[str, Any] = json.loads(body)
    return found
