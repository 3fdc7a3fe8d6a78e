"""The table's store: what it holds, and the offsets it answers as persisted, across rebalances.

faust's recovery is replaced here by the calls it makes on a store (applying changelog
batches, acknowledging the table's writes, completing a recovery); the integration tests
(``test_two_instances.py``) run the same against Kafka.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import faust
from faust.streams import _current_event
from faust.types import TP
from structlog.testing import capture_logs

from fluxgate_device_status import metrics
from fluxgate_device_status.changelog_load import Loaded, LoadStalled
from fluxgate_device_status.recovery import LoadingRecovery, LoadingTableManager
from fluxgate_device_status.store import RetainingStore

CHANGELOG = "status-devices-changelog"


def tp(partition: int) -> TP:
    return TP(CHANGELOG, partition)


class Event:
    """A changelog record, or the input record a table write is made for, as faust hands it."""

    def __init__(self, key: bytes, value: bytes | None, partition: int, offset: int) -> None:
        self.key, self.value = key, value
        self.message = SimpleNamespace(tp=tp(partition), partition=partition, offset=offset, value=value)


def new_store() -> RetainingStore:
    app = faust.App("store-test", store="fluxgate-retaining://", autodiscover=False)
    table = app.Table("devices", key_type=bytes, value_type=bytes, partitions=3)
    store = table.data
    assert isinstance(store, RetainingStore)
    return store


def apply(store: RetainingStore, *events: Event) -> None:
    store.apply_changelog_batch(list(events), lambda key: key, lambda value: value)


def complete(store: RetainingStore, active: set[int], standby: set[int] = frozenset()) -> None:  # type: ignore[assignment]
    asyncio.run(store.on_recovery_completed({tp(p) for p in active}, {tp(p) for p in standby}))


def write_for(store: RetainingStore, event: Event, key: bytes, value: bytes) -> None:
    """A table write made while ``event`` is processed (faust's agent context)."""
    token = _current_event.set(weakref.ref(event))  # type: ignore[arg-type]
    try:
        store[key] = value
    finally:
        _current_event.reset(token)


def test_a_restore_records_the_newest_offset_of_each_partition_and_answers_it_as_persisted() -> None:
    store = new_store()
    assert store.persisted_offset(tp(0)) is None  # nothing held: faust reads from the start
    applied = metrics.CHANGELOG_APPLIED._value.get()
    apply(store, Event(b"a", b"1", 0, 4), Event(b"b", b"1", 1, 7), Event(b"a", b"2", 0, 9))
    assert (store.persisted_offset(tp(0)), store.persisted_offset(tp(1))) == (9, 7)
    assert store.persisted_offset(tp(2)) is None
    assert metrics.CHANGELOG_APPLIED._value.get() - applied == 3
    assert dict(store.data) == {b"a": b"2", b"b": b"1"}


def test_an_acknowledged_write_moves_the_offset_forward_never_back() -> None:
    store = new_store()
    apply(store, Event(b"a", b"1", 0, 9))
    store.set_persisted_offset(tp(0), 12)  # the table's write, acknowledged by Kafka
    store.set_persisted_offset(tp(0), 11)  # an older acknowledgement, later
    assert store.persisted_offset(tp(0)) == 12


def test_a_completed_recovery_keeps_the_owned_and_standby_partitions_and_drops_the_rest_with_their_offsets() -> None:
    store = new_store()
    apply(store, Event(b"a", b"1", 0, 1), Event(b"b", b"1", 1, 1), Event(b"c", b"1", 2, 1))
    complete(store, active={0}, standby={1})
    # faust's memory store drops the standby's entries here (and so lost its copy's start)
    assert dict(store.data) == {b"a": b"1", b"b": b"1"}
    assert [store.persisted_offset(tp(p)) for p in range(3)] == [1, 1, None]


def test_what_this_instance_wrote_goes_with_its_partition() -> None:
    """faust's memory store knows the partition only of the entries a restore applied: what the
    table wrote for an input record stayed in memory after the partition went elsewhere."""
    store = new_store()
    write_for(store, Event(b"r", b"", 2, 40), b"c", b"written")
    write_for(store, Event(b"r", b"", 0, 41), b"a", b"written")
    store[b"z"] = b"outside an agent"  # no record: its partition is not known, it is kept
    complete(store, active={0, 1})
    assert dict(store.data) == {b"a": b"written", b"z": b"outside an agent"}
    del store[b"a"]
    assert b"a" not in store._key_partition


def test_a_partition_that_comes_back_after_being_dropped_is_restored_from_the_start() -> None:
    store = new_store()
    apply(store, Event(b"c", b"1", 2, 5))
    complete(store, active={0})
    assert store.persisted_offset(tp(2)) is None and b"c" not in store.data


class Loader:
    """A ``ChangelogLoader`` handing over given chunks, then failing if told to (unit tests only)."""

    def __init__(self, *chunks: list[Loaded], then: Exception | None = None) -> None:
        self.chunks, self.then = chunks, then
        self.starts: dict[TP, int] = {}

    async def load(self, starts: dict[TP, int], go_on: Any) -> AsyncIterator[list[Loaded]]:
        self.starts = dict(starts)
        for chunk in self.chunks:
            if not go_on():
                return
            yield chunk
        if self.then is not None:
            raise self.then


def loaded(key: bytes, value: bytes | None, partition: int, offset: int) -> Loaded:
    return Loaded(tp(partition), offset, key, value)


def load(store: RetainingStore, loader: Loader, partitions: set[int], go_on: Any = lambda: True) -> None:
    store.app.changelog_loader = loader  # type: ignore[attr-defined]  # as app.py sets it on StatusApp
    asyncio.run(store.load({tp(p) for p in partitions}, go_on))


def test_a_bulk_load_applies_as_faust_would_from_each_partitions_own_offset() -> None:
    """In order, a tombstone deleting its key, the newest offset of each partition persisted,
    each record counted as applied; each partition read from past what the store holds."""
    store = new_store()
    apply(store, Event(b"a", b"1", 0, 4))
    applied = metrics.CHANGELOG_APPLIED._value.get()
    loader = Loader(
        [loaded(b"a", b"2", 0, 5), loaded(b"b", b"1", 1, 0), loaded(b"c", b"1", 2, 0)],
        [loaded(b"b", None, 1, 1), loaded(b"c", b"2", 2, 3)],
    )
    load(store, loader, {0, 1, 2})
    assert loader.starts == {tp(0): 5, tp(1): 0, tp(2): 0}
    assert dict(store.data) == {b"a": b"2", b"c": b"2"}
    assert [store.persisted_offset(tp(p)) for p in range(3)] == [5, 1, 3]
    assert metrics.CHANGELOG_APPLIED._value.get() - applied == 5
    complete(store, active={0})  # what the load read goes with its partition like the rest
    assert dict(store.data) == {b"a": b"2"}


def test_a_record_the_store_already_holds_applies_nothing_an_older_value_never_comes_back() -> None:
    """faust applies what it had queued before a rebalance paused the partitions, maybe after a
    bulk load read past it; its own recovery also reads the persisted offset's record again."""
    store = new_store()
    load(store, Loader([loaded(b"a", b"1", 0, 3), loaded(b"a", b"2", 0, 4)]), {0})
    applied = metrics.CHANGELOG_APPLIED._value.get()
    apply(store, Event(b"a", b"1", 0, 3), Event(b"a", b"2", 0, 4), Event(b"b", b"1", 0, 5))
    assert dict(store.data) == {b"a": b"2", b"b": b"1"} and store.persisted_offset(tp(0)) == 5
    assert metrics.CHANGELOG_APPLIED._value.get() - applied == 1


def test_a_load_that_fails_keeps_what_it_applied_and_leaves_the_rest_to_faust() -> None:
    store = new_store()
    loader = Loader([loaded(b"a", b"1", 0, 0), loaded(b"a", b"2", 0, 1)], then=LoadStalled("nothing read"))
    load(store, loader, {0})  # logged, not raised: faust's recovery reads on from offset 1
    assert dict(store.data) == {b"a": b"2"} and store.persisted_offset(tp(0)) == 1


def test_a_load_a_newer_rebalance_overtakes_stops_between_chunks() -> None:
    store = new_store()
    asked = iter([True, False])
    load(store, Loader([loaded(b"a", b"1", 0, 0)], [loaded(b"b", b"1", 0, 1)]), {0}, lambda: next(asked))
    assert dict(store.data) == {b"a": b"1"} and store.persisted_offset(tp(0)) == 0


def test_only_a_load_that_read_something_says_so() -> None:
    """Every rebalance asks for a load; one that read nothing (nothing past the store's offsets,
    or fewer records than the threshold, left to faust: changelog_load.py) logs no line."""
    store = new_store()
    with capture_logs() as logs:
        load(store, Loader(), {0})
        load(store, Loader([loaded(b"a", b"1", 0, 0)]), {0})
    assert [(e["event"], e.get("records")) for e in logs] == [("table.loaded", 1)]


class Offsets:
    """The earliest offset of each changelog partition, as faust's consumer answers it (unit tests only)."""

    def __init__(self, earliest: dict[TP, int]) -> None:
        self.earliest = earliest

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return {t: self.earliest[t] for t in tps}


def test_the_recovery_starts_each_partition_after_what_the_store_loaded_in_bulk() -> None:
    """In the recovery's task, as it builds its start offsets (recovery.py): never in the
    rebalance callback, during which aiokafka sends no heartbeat."""
    app = faust.App("status", store="fluxgate-retaining://", autodiscover=False, TableManager=LoadingTableManager)
    table = app.Table("devices", key_type=bytes, value_type=bytes, partitions=3)
    store = table.data
    assert isinstance(store, RetainingStore)
    topic = table.changelog_topic.get_topic_name()
    assert topic == CHANGELOG
    apply(store, Event(b"c", b"1", 2, 40))  # held from before: read on from 41
    app.changelog_loader = loader = Loader(  # type: ignore[attr-defined]
        [Loaded(TP(topic, 0), 6, b"a", b"1"), Loaded(TP(topic, 2), 41, b"c", b"2")]
    )
    recovery = app.tables.recovery
    assert isinstance(recovery, LoadingRecovery)
    tps = {TP(topic, p) for p in range(3)}
    recovery.tp_to_table.update({t: table for t in tps})
    destination: Counter[TP] = Counter({t: None for t in tps})  # type: ignore[misc]  # as faust's _add leaves them
    earliest = Offsets({TP(topic, 0): 5, TP(topic, 1): 3, TP(topic, 2): 0})
    asyncio.run(recovery._build_offsets(earliest, tps, destination, "active"))  # type: ignore[arg-type]
    assert loader.starts == {TP(topic, 0): 0, TP(topic, 1): 0, TP(topic, 2): 41}
    assert dict(store.data) == {b"a": b"1", b"c": b"2"}
    # after the load's last record; from faust's own earliest where nothing was loaded
    assert dict(destination) == {TP(topic, 0): 6, TP(topic, 1): 2, TP(topic, 2): 41}
