"""The device table's store: faust's in-memory store, keeping what it holds across a rebalance.

faust's memory store says it has nothing persisted (``persisted_offset`` is None), so every
rebalance, a rejoin after the group dropped this instance included, reads each partition's
changelog from its start, a partition this instance kept all along too: about 400 s for a
million devices. This store records, per changelog partition, the last offset its entries
hold (the newest record a restore applied, or the newest write of this instance that Kafka
acknowledged: faust tells a store through ``set_persisted_offset``, as it tells its RocksDB
store), and answers it as persisted. faust's recovery then reads only what was written
after it. Whatever another instance wrote meanwhile is there, in order, and applying a
record this store already holds leaves it as it was.

What this instance no longer owns or stands by for is dropped with its offset once the
recovery is complete, so a partition that comes back is restored from the start. faust's
store drops the standby partitions' entries there too, keeping only the active ones; with an
offset kept, a takeover reading only the tail would then miss them. Here a standby's copy is
kept whole, with its offset, and a takeover reads only its tail.

Before faust's recovery reads a partition it is given (active or standby), the store reads it
from its own offset to the end in bulk (``changelog_load.py``, called by ``recovery.py`` as
the recovery builds its start offsets): faust's recovery, a record at a time, took 24.5 CPU-s
for 300,000 devices. The recovery then starts after the last record the store applied. A load
that fails or stalls is logged and left where it got: the recovery reads the rest, as it
would have read it all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Set
from typing import Any

import structlog
from faust import current_event
from faust.stores import memory
from faust.types import TP, EventT

from fluxgate_device_status import metrics
from fluxgate_device_status.changelog_load import ChangelogLoader, Loaded

log = structlog.get_logger(__name__)


class RetainingStore(memory.Store[bytes, bytes]):
    """faust's memory store whose entries and offsets outlive a rebalance (module docstring)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.offsets: dict[TP, int] = {}  # changelog partition -> the newest offset its entries hold

    def apply_changelog_batch(
        self, batch: Iterable[EventT[Any]], to_key: Callable[[Any], Any], to_value: Callable[[Any], Any]
    ) -> None:
        # What the store holds already is not applied again: a record fetched before a bulk load
        # read past it (faust pauses the partitions, but what it had queued is still applied)
        # would put an older value back over a newer one.
        events = [e for e in batch if e.message.offset > self.offsets.get(e.message.tp, -1)]
        super().apply_changelog_batch(events, to_key, to_value)
        for event in events:
            self.set_persisted_offset(event.message.tp, event.message.offset)
        metrics.CHANGELOG_APPLIED.inc(len(events))

    def __setitem__(self, key: Any, value: Any) -> None:
        # The table writes in an agent, for the record being processed, whose partition faust
        # also gives the changelog record (Table.partition_for_key). faust's store notes the
        # partition only of what a restore applied, so what was written here stayed in memory
        # after its partition went to another instance.
        super().__setitem__(key, value)
        event = current_event()
        if event is not None:
            self._key_partition[key] = event.message.partition

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._key_partition.pop(key, None)

    async def load(self, tps: Set[TP], go_on: Callable[[], bool]) -> None:
        """Apply each partition's changelog past this store's offset, in bulk (module docstring),
        with the app's ``changelog_loader`` (app.py); an app without one restores through faust
        alone. Called by the recovery (recovery.py)."""
        loader: ChangelogLoader | None = getattr(self.app, "changelog_loader", None)
        if loader is None or not tps:
            return
        began, records = time.monotonic(), 0
        try:
            async for chunk in loader.load({tp: self.offsets.get(tp, -1) + 1 for tp in tps}, go_on):
                self.apply_loaded(chunk)
                records += len(chunk)
        except Exception as exc:  # any failure: faust's recovery reads the rest
            log.warning("table.load_incomplete", error=str(exc), error_class=type(exc).__name__, records=records)
        if records:  # nothing read: nothing past the store's offsets, or left to faust (changelog_load.py)
            log.info("table.loaded", partitions=sorted(str(tp) for tp in tps), records=records,
                     seconds=round(time.monotonic() - began, 3))  # fmt: skip

    def apply_loaded(self, chunk: list[Loaded]) -> None:
        """Records a bulk load read, as faust's recovery would apply them: in order, a tombstone
        deleting its key, each partition's offset the newest applied."""
        data, partitions, offsets = self.data, self._key_partition, self.offsets
        for tp, offset, key, value in chunk:
            if value is None:
                data.pop(key, None)
                partitions.pop(key, None)
            else:
                data[key] = value
                partitions[key] = tp.partition
            offsets[tp] = offset  # a partition's records come in order
        metrics.CHANGELOG_APPLIED.inc(len(chunk))

    def persisted_offset(self, tp: TP) -> int | None:
        return self.offsets.get(tp)

    def set_persisted_offset(self, tp: TP, offset: int) -> None:
        self.offsets[tp] = max(offset, self.offsets.get(tp, -1))

    async def on_recovery_completed(self, active_tps: Set[TP], standby_tps: Set[TP]) -> None:
        kept = {tp.partition for tp in (*active_tps, *standby_tps)}
        gone = [key for key, partition in self._key_partition.items() if partition not in kept]
        for key in gone:
            self.data.pop(key, None)
            del self._key_partition[key]
        for tp in [tp for tp in self.offsets if tp.partition not in kept]:
            del self.offsets[tp]
