"""faust's recovery, with the table's changelog read in bulk first (``store.py``).

The load runs in the recovery's own task, where faust builds each partition's start offset
(``Recovery._build_offsets``), never in the rebalance callback: aiokafka sends no heartbeat
until that callback returns, so a load of a million devices there (8.7 s) outlived the
consumer's 10 s session; the group dropped the member and rebalanced again.

faust waits ``broker_request_timeout`` for each step of its recovery and cancels a step that
takes longer, so a load stops at half of it and leaves the rest to faust's reading. A rebalance
that comes during the load cancels it too (faust's ``RebalanceAgain``): what it applied stays,
with its offsets.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Set
from typing import Any

from faust.tables import TableManager
from faust.tables.recovery import Recovery
from faust.types import TP

from fluxgate_device_status.store import RetainingStore


class LoadingRecovery(Recovery):
    """faust's ``Recovery`` whose start offsets come after what the store loaded in bulk."""

    async def _build_offsets(self, consumer: Any, tps: set[TP], destination: Counter[TP], title: str) -> None:
        budget_s = float(self.app.conf.broker_request_timeout) / 2
        deadline = time.monotonic() + budget_s
        for store, store_tps in self._retaining_stores(tps):
            await store.load(store_tps, lambda: time.monotonic() < deadline)
            for tp in store_tps:
                persisted = store.persisted_offset(tp)
                if persisted is not None:
                    destination[tp] = max(destination.get(tp) or -1, persisted)
        await super()._build_offsets(consumer, tps, destination, title)

    def _retaining_stores(self, tps: Set[TP]) -> list[tuple[RetainingStore, set[TP]]]:
        """Each table's store that loads in bulk, with its partitions among ``tps``."""
        stores: dict[int, RetainingStore] = {}
        by_store: dict[int, set[TP]] = defaultdict(set)
        for tp in tps:
            store = getattr(self.tp_to_table.get(tp), "data", None)  # a Collection's store
            if isinstance(store, RetainingStore):
                stores[id(store)] = store
                by_store[id(store)].add(tp)
        return [(stores[key], found) for key, found in by_store.items()]


class LoadingTableManager(TableManager):
    """faust's ``TableManager`` recovering with :class:`LoadingRecovery`."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = LoadingRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
