"""The deadline index on its own: which devices it says are due, and its counts."""

from __future__ import annotations

import random

from fluxgate_device_status.deadlines import Deadlines, PartitionDeadlines
from fluxgate_device_status.device_state import Reading, State, apply_reading, is_silent, mark_offline

THRESHOLD = 60_000
T0 = 1_800_000_000_000


def state(device: str, heard: int, partition: int = 0, online: bool = True) -> State:
    reading = Reading(device, "temperature", 20.0, "Cel", heard - 5, heard, "MQTT", f"sensors/{device}", partition, 1)
    new = apply_reading(None, reading, heard)[0]
    return new if online else mark_offline(new, heard + THRESHOLD)


def test_a_device_is_due_at_its_deadline_and_not_before() -> None:
    index = PartitionDeadlines()
    index.track(b"a", T0 + THRESHOLD)
    assert index.due(T0 + THRESHOLD - 1) == []
    assert index.due(T0 + THRESHOLD) == [b"a"]
    assert index.due(T0 + THRESHOLD + 5_000) == [b"a"]  # still ONLINE: due again until it is not


def test_a_device_heard_since_is_not_due_and_comes_due_at_its_new_deadline() -> None:
    index = PartitionDeadlines()
    index.track(b"a", T0)
    index.track(b"a", T0 + 30_000)  # a reading: no second heap entry, the old one is put back when due
    assert len(index.heap) == 1
    assert index.due(T0 + 29_999) == []
    assert index.heap == [(T0 + 30_000, b"a")]
    assert index.due(T0 + 30_000) == [b"a"]


def test_a_deadline_moved_earlier_comes_due_then_and_only_once() -> None:
    index = PartitionDeadlines()
    index.track(b"a", T0 + 10_000)
    index.track(b"a", T0)  # the wall clock stepped back
    assert index.due(T0) == [b"a"]
    assert index.due(T0 + 10_000) == [b"a"]  # two heap entries, one device found


def test_an_offline_or_forgotten_device_is_never_due_and_the_counts_follow() -> None:
    index = PartitionDeadlines()
    for key in (b"a", b"b", b"c"):
        index.track(key, T0)
    index.track(b"b", None)
    index.forget(b"c")
    assert index.due(T0 + THRESHOLD) == [b"a"]
    assert (set(index.online), index.offline) == ({b"a"}, {b"b"})
    index.track(b"b", T0 + 1)  # ONLINE again
    assert (set(index.online), index.offline) == ({b"a", b"b"}, set())


def test_due_says_exactly_which_devices_is_silent_would_judge_silent() -> None:
    """The index against the rule it stands in for, on random fleets, watch starts and ticks."""
    rng = random.Random(7)
    for _ in range(50):
        watch_start = T0 + rng.randrange(-2 * THRESHOLD, 2 * THRESHOLD)
        states = {
            f"d{i}".encode(): state(f"d{i}", T0 + rng.randrange(-THRESHOLD, THRESHOLD), online=rng.random() < 0.8)
            for i in range(100)
        }
        index = Deadlines(THRESHOLD)
        for key, value in states.items():
            index.track(key, value)
        for at in sorted(T0 + rng.randrange(0, 3 * THRESHOLD) for _ in range(5)):
            silent = {key for key, value in states.items() if is_silent(value, at, THRESHOLD, watch_start)}
            due = set(index.due(0, at)) if watch_start + THRESHOLD <= at else set()
            assert due == silent


def test_counts_and_retain_keep_only_the_owned_partitions() -> None:
    index = Deadlines(THRESHOLD)
    index.track(b"a", state("a", T0, partition=0))
    index.track(b"b", state("b", T0, partition=1, online=False))
    index.track(b"c", state("c", T0, partition=2))
    assert index.counts({0, 1, 2}) == {"ONLINE": 2, "OFFLINE": 1}
    index.retain({0, 1})
    assert set(index.partitions) == {0, 1}
    assert index.counts({0, 1, 2}) == {"ONLINE": 1, "OFFLINE": 1}
    assert index.due(2, T0 + THRESHOLD) == []


def test_a_rebuild_indexes_the_owned_partitions_only() -> None:
    index = Deadlines(THRESHOLD)
    index.track(b"old", state("old", T0, partition=1))
    index.rebuild([(b"a", state("a", T0, partition=0)), (b"b", state("b", T0, partition=1))], {0})
    assert set(index.partitions) == {0}
    assert index.counts({0, 1}) == {"ONLINE": 1, "OFFLINE": 0}
