"""The rows of one Cassandra partition written together, as one ``UNLOGGED BATCH``.

A batch whose rows share one partition key is a single mutation on one replica set: the
coordinator forwards it once and the replica applies it as one, which costs Cassandra about
half of what one statement per row does. A batch across partitions would make the
coordinator fan it out instead, so groups never span two partitions (nor two tables).

A group also never holds the same row twice: the rows of a batch share one write timestamp,
and two values of one cell at one timestamp are settled by comparing the values, not by
which came later. The second version of a row starts a new group, sent once the first is
written (:func:`waves`), so it gets the later timestamp, as it would as a statement of its own:
statements in flight together may be stamped in any order (the driver stamps each as a thread
sends it), so a later version, or a delete after a write, is never in flight with the earlier.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from cassandra.query import BatchStatement, BatchType


def partition_groups(keys: Sequence[tuple[Hashable, Hashable]], cap: int) -> list[list[int]]:
    """Positions of ``keys`` (each ``(partition, row)``) grouped by partition, in order of first
    appearance, at most ``cap`` to a group and no row twice in one group."""
    groups: list[list[int]] = []
    open_: dict[Hashable, tuple[list[int], set[Hashable]]] = {}
    for position, (partition, row) in enumerate(keys):
        current = open_.get(partition)
        if current is None or len(current[0]) >= cap or row in current[1]:
            current = ([], set())
            open_[partition] = current
            groups.append(current[0])
        current[0].append(position)
        current[1].add(row)
    return groups


def waves(rows: Sequence[Sequence[Hashable]]) -> list[list[int]]:
    """Positions of statements (each writing ``rows[i]``) in waves to send one after another:
    a statement comes a wave after every earlier one that writes one of its rows, so each row's
    versions are written in order. One wave when no row repeats (the usual case)."""
    last: dict[Hashable, int] = {}
    out: list[list[int]] = []
    for position, keys in enumerate(rows):
        wave = 1 + max((last[key] for key in keys if key in last), default=-1)
        if wave == len(out):
            out.append([])
        out[wave].append(position)
        for key in keys:
            last[key] = wave
    return out


def group_statement(statements: Sequence[Any]) -> Any:
    """One statement as it is; several as one ``UNLOGGED BATCH`` (no batch log: every row is
    of one partition, and each row is an idempotent upsert)."""
    if len(statements) == 1:
        return statements[0]
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    for statement in statements:
        batch.add(statement)
    return batch
