"""Python's cyclic garbage collector, set for a service that holds thousands of records in flight.

With the defaults a young collection runs after every 700 new container objects, and
every tenth walks the middle generation too. A persister's records, their decoded dicts
and items (a few thousand batches' worth, waiting or being written) are such objects, so
the collector ran every ~50 records and walked the ones in flight again and again: in
``bench/hazelcast.py`` it was 14 % of the persister's CPU per record (10.4 -> 8.9 µs) and
25 % of reading and decoding alone (5.2 -> 3.9 µs). Nearly nothing the data path makes is
in a reference cycle (records, dicts, tuples, bytes die by reference counting), so
collecting less often frees the same memory, later by a few thousand objects.

What the service made before it runs (modules, settings, clients, compiled readers) is
moved out of the collector's sight (:func:`gc.freeze`): it lives as long as the process,
and a full collection no longer walks it.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000  # new container objects between young collections (Python's default: 700)


def tune_collector() -> None:
    """Collect once, freeze what exists, and make young collections rarer; the older
    generations keep their thresholds (relative to the young one's runs)."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
