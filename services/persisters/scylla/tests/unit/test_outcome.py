"""Which failures are the store's (wait and write the batch again) and which are the item's."""

from __future__ import annotations

import pytest
from cassandra import InvalidRequest, OperationTimedOut, Unavailable, WriteTimeout
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import OverloadedErrorMessage
from fluxgate_testing.sink.suite import DAY
from scylla_store import aggregate, items, statement

from fluxgate_scylla_persister.driver import is_transient
from fluxgate_scylla_persister.sink import outcome
from fluxgate_sink.errors import SinkError, StoreUnavailable
from fluxgate_sink.sink import ItemFailure

BATCH = items(statement("UPSERT INTO ks.t SELECT * FROM x AUTOCREATE"), [aggregate(f"d{i}", DAY) for i in range(4)])
AWAY = NoHostAvailable("Unable to complete the operation against any hosts", {"127.0.0.1:9042": OSError("refused")})


def test_nothing_written_with_the_store_away_is_the_whole_batch() -> None:
    with pytest.raises(StoreUnavailable, match=r"nothing of 4 written: NoHostAvailable: 127\.0\.0\.1:9042: OSError"):
        outcome(BATCH, {0: AWAY, 1: OperationTimedOut("t"), 2: AWAY}, [ItemFailure(3, SinkError("bind"))])


def test_a_refused_statement_fails_alone_and_a_timed_out_one_is_retriable() -> None:
    null_key = InvalidRequest("Invalid null value for clustering key part unit")
    sent = {0: None, 1: null_key, 2: WriteTimeout("w", write_type=0), 3: None}
    first, second = outcome(BATCH, sent, [])
    assert (first.index, first.error.retriable) == (1, False)
    assert "InvalidRequest: Invalid null value" in str(first.error) and "ks.t" in str(first.error)
    assert (second.index, second.error.retriable) == (2, True)


def test_every_statement_refused_is_no_outage() -> None:
    refused = outcome(BATCH, {i: InvalidRequest("no") for i in range(4)}, [])
    assert [f.index for f in refused] == [0, 1, 2, 3] and not any(f.error.retriable for f in refused)


def test_what_counts_as_the_store_being_away() -> None:
    overloaded = OverloadedErrorMessage(code=0x1001, message="overloaded", info=None)
    for error in (AWAY, OperationTimedOut("t"), Unavailable("u"), WriteTimeout("w", write_type=0), overloaded):
        assert is_transient(error), error
    for error in (InvalidRequest("i"), TypeError("t"), ValueError("v")):
        assert not is_transient(error), error
