"""The last offset written per target and partition, kept in Hazelcast beside the data.

Ringbuffers, queues and reliable topics append: writing a batch again doubles it. The
runner commits a batch's offsets only after ``write_batch`` returned, so a crash between
the two repeats it. To close that window the sink records, in the IMap
``fluxgate.offsets.<group>``, the highest offset it wrote per ``<structure>:<target>|<topic>|<partition>``
right after the data, and before writing it reads the record and skips the items at or
below it. What remains is the gap between writing the data and writing the record: one
batch at most, in practice none (the record is the very next call).

The record is read before every batch, not cached: after a rebalance another member of
the group may have written the partition meanwhile. It lives in the same cluster as the
data, so when the cluster loses the data (every member restarted without persistence)
it loses the record too, and the records not committed yet are written again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fluxgate_hazelcast_persister.structures import Structure
from fluxgate_sink.sink import SinkItem


def record_key(structure: Structure, item: SinkItem) -> str:
    """The record of one target and partition (``|`` never occurs in a topic or target name)."""
    return f"{structure.value}:{item.target}|{item.source.topic}|{item.source.partition}"


def already_written(offset: int, key: str, recorded: Mapping[str, int]) -> bool:
    """Whether the record says the item at ``offset`` was written before."""
    last = recorded.get(key)
    return last is not None and offset <= last


def written_through(
    keys: Sequence[str], offsets: Sequence[int], written: int, refused: Mapping[str, int] | None = None
) -> dict[str, int]:
    """The offsets to record once the first ``written`` of a group's items (in order) are in the store.

    Items after the first one not written are not recorded even if a later call writes
    them: the record only ever says "everything up to here is in". ``refused`` holds, per
    key, the lowest offset the store refused: the record stays below it, so a restart
    before its dead letter is confirmed sends it through the error policy again."""
    done = list(offsets[:written])
    if not refused and done and done[0] >= 0 and sorted(done) == done:
        # A runner's batch: offsets in order, nothing refused. Each key's highest offset is
        # then its last, which dict() keeps in one pass in C instead of a comparison per item.
        return dict(zip(keys[:written], done, strict=True))
    return written_through_each(keys, offsets, written, refused or {})


def written_through_each(
    keys: Sequence[str], offsets: Sequence[int], written: int, refused: Mapping[str, int]
) -> dict[str, int]:
    """:func:`written_through` item by item, whatever the order (the general case)."""
    through: dict[str, int] = {}
    for key, offset in zip(keys[:written], offsets[:written], strict=True):
        cap = refused.get(key)
        if offset > through.get(key, -1) and (cap is None or offset < cap):
            through[key] = offset
    return through
