"""The rows of one partition go out as one UNLOGGED BATCH, at most ``partition_batch_rows`` of
them, never two partitions or two versions of a row in one; a refused batch is written again
row by row so that only its bad rows fail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cassandra import InvalidRequest, WriteTimeout
from cassandra.query import BatchStatement, BatchType

from fluxgate_scylla_persister.grouping import Rows, group_statement, partition_groups, rewritten_after, waves
from fluxgate_scylla_persister.settings import ConnectionSettings
from fluxgate_scylla_persister.sink import ScyllaSink


def test_rows_are_grouped_by_partition_in_order_of_first_appearance() -> None:
    keys = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]
    assert partition_groups(keys, cap=20) == [[0, 2, 5], [1, 4], [3]]


def test_a_group_holds_at_most_cap_rows() -> None:
    keys = [("a", minute) for minute in range(7)]
    assert partition_groups(keys, cap=3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert partition_groups(keys, cap=1) == [[i] for i in range(7)]


def test_a_second_version_of_a_row_starts_a_later_group() -> None:
    # Rows of one batch share one timestamp; the later version must be the later write.
    keys = [("a", 1), ("a", 2), ("a", 1), ("a", 3)]
    assert partition_groups(keys, cap=20) == [[0, 1], [2, 3]]


def test_a_statement_waits_for_every_earlier_one_that_writes_one_of_its_rows() -> None:
    assert waves([["a1", "a2"], ["b1"], ["c1"]]) == [[0, 1, 2]]  # no row twice: all at once
    # a1's second version waits for its first; b1 waits for nothing; a1's third for the second,
    # and c1 with it goes in that wave too.
    assert waves([["a1", "a2"], ["b1"], ["a1", "a3"], ["a1", "c1"], ["b2"]]) == [[0, 1, 4], [2], [3]]
    assert waves([]) == []


def test_a_delete_of_a_partition_or_range_is_alone_in_its_group_and_no_later_row_joins_the_earlier() -> None:
    keys = [("a", 1), ("b", 1), ("a", Rows()), ("a", 2), ("a", 3), ("a", Rows((5,))), ("b", 2)]
    assert partition_groups(keys, cap=20) == [[0], [1, 6], [2], [3, 4], [5]]


def test_a_delete_of_a_partition_waits_for_its_partitions_earlier_writes_and_its_later_ones_for_it() -> None:
    a_all, a_day = ("a", Rows()), ("a", Rows(("2026-11-29",)))
    # a1 and b1 at once; the partition's delete after a1 (not after b1); a2 after the delete.
    assert waves([[("a", 1)], [("b", 1)], [a_all], [("a", 2)], [("b", 2)]]) == [[0, 1, 4], [2], [3]]
    # two deletes of one partition one after the other; another partition's rows go at once
    assert waves([[a_day], [("c", 1)], [a_all], [("c", 2)]]) == [[0, 1, 3], [2]]
    assert waves([[("b", 1)], [a_all]]) == [[0, 1]]  # nothing of a's before it: no wait


def test_what_follows_a_retried_statement_on_its_rows_is_written_again_after_it() -> None:
    keys = [("a", 1), ("a", 2), ("a", 1), ("a", Rows()), ("b", 1), ("a", 3)]
    assert rewritten_after(keys, [0]) == [2, 3, 5]  # a1's later version, the delete covering a1, what follows it
    assert rewritten_after(keys, [1]) == [3, 5]  # a2: the delete covering it, and a3 after the delete
    assert rewritten_after(keys, [3]) == [5]  # the delete: every later row of its partition
    assert rewritten_after(keys, [4]) == []


async def test_a_write_before_a_partitions_delete_in_a_refused_batch_is_deleted_again_after_it() -> None:
    # a1 is in a refused batch and written again row by row, after the partition's delete was
    # sent: the delete is sent again after it, so that a1 stays deleted, and a2, written after
    # the delete, after that.
    pump = FakePump()
    bound = ["a1", "a9 BAD", "DELETE a", "a2"]
    errors = await written(20, pump)._written(bound, [("a", 1), ("a", 9), ("a", Rows()), ("a", 2)])
    assert pump.sent[:3] == [[["a1", "a9 BAD"]], [["DELETE a"]], [["a2"]]]
    assert pump.sent[3:] == [[["a1"], ["a9 BAD"]], [["DELETE a"]], [["a2"]]]
    assert [type(e).__name__ if e else None for e in errors] == [None, "InvalidRequest", None, None]


def test_one_row_is_sent_as_it_is_and_several_as_an_unlogged_batch() -> None:
    assert group_statement(["INSERT one"]) == "INSERT one"
    batch = group_statement(["INSERT one", "INSERT two"])
    assert isinstance(batch, BatchStatement) and batch.batch_type == BatchType.UNLOGGED
    assert [query for _, query, _ in batch._statements_and_parameters] == ["INSERT one", "INSERT two"]


class FakePump:
    """Refuses any statement (or batch holding one) that says BAD; times out those that say SLOW."""

    def __init__(self) -> None:
        self.sent: list[list[list[str]]] = []

    async def run(self, statements: Sequence[Any]) -> list[BaseException | None]:
        rows = [rows_of(statement) for statement in statements]
        self.sent.append(rows)
        return [fate(r) for r in rows]


def rows_of(statement: Any) -> list[str]:
    if isinstance(statement, BatchStatement):
        return [query for _, query, _ in statement._statements_and_parameters]
    return [statement]


def fate(rows: list[str]) -> BaseException | None:
    if any("SLOW" in row for row in rows):
        return WriteTimeout("timed out", write_type=0)
    if any("BAD" in row for row in rows):
        return InvalidRequest("Invalid null value for clustering column window_start")
    return None


def written(rows: int, pump: FakePump) -> ScyllaSink:
    sink = ScyllaSink(ConnectionSettings(partition_batch_rows=rows), cluster=object())  # type: ignore[arg-type]
    sink._pump = pump  # type: ignore[assignment]
    return sink


async def test_a_refused_batch_is_written_again_row_by_row_and_only_the_bad_row_fails() -> None:
    pump = FakePump()
    bound = ["a1", "a2 BAD", "a3", "b1"]
    keys = [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
    errors = await written(20, pump)._written(bound, keys)
    assert pump.sent == [[["a1", "a2 BAD", "a3"], ["b1"]], [["a1"], ["a2 BAD"], ["a3"]]]
    assert [type(e).__name__ if e else None for e in errors] == [None, "InvalidRequest", None, None]


async def test_a_batch_that_timed_out_fails_each_of_its_rows_retriably_without_a_row_by_row_pass() -> None:
    pump = FakePump()
    errors = await written(20, pump)._written(["a1 SLOW", "a2", "b1"], [("a", 1), ("a", 2), ("b", 1)])
    assert len(pump.sent) == 1
    assert [type(e).__name__ if e else None for e in errors] == ["WriteTimeout", "WriteTimeout", None]


async def test_a_later_version_of_a_row_in_a_refused_batch_is_written_again_after_the_earlier() -> None:
    # a1 (old) is in the refused first group, a1' (new) was written in the second: the per-row
    # pass writes a1 again, so a1' must be written after it to stay the later write.
    pump = FakePump()
    bound = ["a1 old", "a2 BAD", "a1 new"]
    errors = await written(20, pump)._written(bound, [("a", 1), ("a", 2), ("a", 1)])
    assert pump.sent[:2] == [[["a1 old", "a2 BAD"]], [["a1 new"]]]  # never in flight together
    assert pump.sent[2:] == [[["a1 old"], ["a2 BAD"]], [["a1 new"]]]
    assert [type(e).__name__ if e else None for e in errors] == [None, "InvalidRequest", None]


async def test_a_rows_versions_are_never_in_flight_together() -> None:
    # The driver stamps a statement as a thread sends it: two in flight together may be stamped in
    # either order, and a write after a delete of its row (or a second version) must be the later.
    pump = FakePump()
    bound = ["a1 v1", "b1", "a1 v2", "a1 v3", "b2"]
    keys = [("a", 1), ("b", 1), ("a", 1), ("a", 1), ("b", 2)]
    errors = await written(20, pump)._written(bound, keys)
    assert pump.sent == [[["a1 v1"], ["b1", "b2"]], [["a1 v2"]], [["a1 v3"]]]
    assert errors == [None] * 5


async def test_the_cap_splits_a_partition_into_several_batches() -> None:
    pump = FakePump()
    await written(2, pump)._written(["a1", "a2", "a3"], [("a", 1), ("a", 2), ("a", 3)])
    assert pump.sent == [[["a1", "a2"], ["a3"]]]
