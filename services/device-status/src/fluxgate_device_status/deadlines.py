"""When each owned device turns silent, beside the table, so a tick reads only the devices due.

The table stays the truth: this is an index of it, kept where the tracker writes the table
(a reading, a silence decided) and rebuilt from it after a restore (``tracker.py``). Per input
partition it holds which devices are ONLINE and which OFFLINE (the status counts, exact by
construction), and for each ONLINE device its deadline: the time its silence reaches the
threshold (``heard_ms + threshold``), which ``is_silent`` judges by when the partition's watch
started earlier still.

Deadlines sit in a min-heap with lazy invalidation: a reading moving a device's deadline later
only updates the device's entry in ``online``; its older heap entry, once due, is put back at
the deadline then current. A device costs one heap operation per threshold at most, however
often it reports, and nothing per tick unless it is due.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from fluxgate_device_status.device_state import State, heard_ms


class PartitionDeadlines:
    """One input partition's devices: ONLINE ones with their deadlines, OFFLINE ones."""

    def __init__(self) -> None:
        self.online: dict[bytes, int] = {}  # device key -> its deadline as the table last said
        self.offline: set[bytes] = set()
        # At least one entry per ONLINE device at or before its deadline; other entries are
        # stale (dropped, or put back at the current deadline, when they come due).
        self.heap: list[tuple[int, bytes]] = []

    def track(self, key: bytes, deadline: int | None) -> None:
        """The device is ONLINE with ``deadline``, or OFFLINE (None)."""
        if deadline is None:
            self.online.pop(key, None)
            self.offline.add(key)
            return
        self.offline.discard(key)
        before = self.online.get(key)
        self.online[key] = deadline
        # A later deadline keeps the entry it has (put back when due); an earlier one (the
        # wall clock stepped back) must come out sooner, so it gets its own entry.
        if before is None or deadline < before:
            heapq.heappush(self.heap, (deadline, key))

    def forget(self, key: bytes) -> None:
        self.online.pop(key, None)
        self.offline.discard(key)

    def due(self, at: int) -> list[bytes]:
        """The ONLINE devices whose deadline is ``at`` or earlier. They stay indexed (due
        again at the next tick unless the table says otherwise by then)."""
        found: dict[bytes, int] = {}
        while self.heap and self.heap[0][0] <= at:
            _, key = heapq.heappop(self.heap)
            deadline = self.online.get(key)
            if deadline is None or key in found:
                continue  # OFFLINE or gone since, or a second entry of a device already found
            if deadline > at:
                heapq.heappush(self.heap, (deadline, key))  # heard since that entry was made
            else:
                found[key] = deadline
        # Put back after the loop: pushed within it they would be popped again at once.
        for key, deadline in found.items():
            heapq.heappush(self.heap, (deadline, key))
        return list(found)


class Deadlines:
    """The deadline index of every input partition this instance owns."""

    def __init__(self, threshold_ms: int) -> None:
        self.threshold_ms = threshold_ms
        self.partitions: dict[int, PartitionDeadlines] = {}

    def deadline(self, state: State) -> int | None:
        """When the device's silence reaches the threshold; None: OFFLINE, nothing to wait for."""
        return heard_ms(state) + self.threshold_ms if state["status"] == "ONLINE" else None

    def track(self, key: bytes, state: State) -> None:
        """Index ``state``, just written to (or read from) the table."""
        partition = self.partitions.setdefault(int(state["partition"]), PartitionDeadlines())
        partition.track(key, self.deadline(state))

    def forget(self, key: bytes, partition: int) -> None:
        if partition in self.partitions:
            self.partitions[partition].forget(key)

    def rebuild(self, entries: Iterable[tuple[bytes, State]], partitions: set[int]) -> None:
        """Index afresh the table's entries on ``partitions`` (after a restore: the changelog
        wrote the table without the tracker)."""
        self.partitions = {partition: PartitionDeadlines() for partition in partitions}
        for key, state in entries:
            if state["partition"] in self.partitions:
                self.track(key, state)

    def retain(self, partitions: set[int]) -> None:
        """Drop the partitions no longer owned: their devices are another instance's now."""
        for partition in set(self.partitions) - partitions:
            del self.partitions[partition]

    def due(self, partition: int, at: int) -> list[bytes]:
        index = self.partitions.get(partition)
        return index.due(at) if index is not None else []

    def counts(self, partitions: set[int]) -> dict[str, int]:
        """The ONLINE and OFFLINE devices on ``partitions``."""
        indexes = [self.partitions[p] for p in partitions if p in self.partitions]
        return {
            "ONLINE": sum(len(index.online) for index in indexes),
            "OFFLINE": sum(len(index.offline) for index in indexes),
        }
