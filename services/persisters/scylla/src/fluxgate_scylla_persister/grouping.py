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

A delete of a whole partition, or of a range of its rows (:class:`Rows`), covers rows it does
not name. It is sent alone, after every earlier statement of its partition is written and
before any later one is sent: a tombstone deletes what was written at or before its timestamp.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.query import BatchStatement, BatchType


@dataclass(frozen=True)
class Rows:
    """The row of a key that stands for every row of its partition whose clustering values start
    with ``prefix`` (none: the whole partition): what a partition's or range's delete covers."""

    prefix: tuple[Any, ...] = ()


def partition_groups(keys: Sequence[tuple[Hashable, Hashable]], cap: int) -> list[list[int]]:
    """Positions of ``keys`` (each ``(partition, row)``) grouped by partition, in order of first
    appearance, at most ``cap`` to a group and no row twice in one group; a :class:`Rows` key
    alone in its group, which no later key joins."""
    groups: list[list[int]] = []
    open_: dict[Hashable, tuple[list[int], set[Hashable]]] = {}
    for position, (partition, row) in enumerate(keys):
        current = open_.get(partition)
        if current is None or len(current[0]) >= cap or row in current[1] or isinstance(row, Rows):
            current = ([], set())
            open_[partition] = current
            groups.append(current[0])
        current[0].append(position)
        current[1].add(row)
        if isinstance(row, Rows):
            del open_[partition]
    return groups


def waves(rows: Sequence[Sequence[tuple[Hashable, Hashable]]]) -> list[list[int]]:
    """Positions of statements (each writing ``rows[i]``) in waves to send one after another:
    a statement comes a wave after every earlier one that writes one of its rows (a
    :class:`Rows` key: any row of its partition), so each row's versions are written in order.
    One wave when no row repeats (the usual case)."""
    last: dict[Hashable, int] = {}  # per (partition, row): the wave of its latest statement
    touched: dict[Hashable, int] = {}  # per partition: of its latest statement
    covered: dict[Hashable, int] = {}  # per partition: of its latest Rows statement
    out: list[list[int]] = []
    for position, keys in enumerate(rows):
        wave = 1 + max((_after(key, last, touched, covered) for key in keys), default=-1)
        if wave == len(out):
            out.append([])
        out[wave].append(position)
        for key in keys:
            last[key] = touched[key[0]] = wave
            if isinstance(key[1], Rows):
                covered[key[0]] = wave
    return out


def _after(
    key: tuple[Hashable, Hashable],
    last: dict[Hashable, int],
    touched: dict[Hashable, int],
    covered: dict[Hashable, int],
) -> int:
    """The latest wave ``key``'s statement must follow (-1: none)."""
    partition, row = key
    if isinstance(row, Rows):
        return touched.get(partition, -1)
    return max(last.get(key, -1), covered.get(partition, -1))


def rewritten_after(keys: Sequence[tuple[Hashable, Hashable]], again: Iterable[int]) -> list[int]:
    """Positions not in ``again`` that follow a statement of ``again`` on one of its rows, or
    follow one of those: when ``again`` is written once more, these must be too, after it, to
    stay the later writes (a partition's delete sent again deletes what was written after it)."""
    retried = set(again)
    rows: set[Hashable] = set()  # (partition, row) of what is written again
    partitions: set[Hashable] = set()
    covering: set[Hashable] = set()  # partitions of a Rows written again
    later = []
    for position, key in enumerate(keys):
        partition, row = key
        if position not in retried:
            if not (key in rows or partition in covering or (isinstance(row, Rows) and partition in partitions)):
                continue
            later.append(position)
        rows.add(key)
        partitions.add(partition)
        if isinstance(row, Rows):
            covering.add(partition)
    return later


def group_statement(statements: Sequence[Any]) -> Any:
    """One statement as it is; several as one ``UNLOGGED BATCH`` (no batch log: every row is
    of one partition, and each row is an idempotent upsert)."""
    if len(statements) == 1:
        return statements[0]
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    for statement in statements:
        batch.add(statement)
    return batch
