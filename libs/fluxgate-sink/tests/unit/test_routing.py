"""The router derives a document id only where the store keys by it, or the statement names a PK."""

from __future__ import annotations

import pytest
from fluxgate_testing.sink.memory import aggregate, record

from fluxgate_sink.kcql import parse
from fluxgate_sink.routing import Router

KEYLESS = "INSERT INTO ring SELECT * FROM t"
WITH_PK = "INSERT INTO ring SELECT * FROM t PK device_id"
DEFAULT_ID = f"d1|temperature|{int(aggregate('d1', 0)['window_start'].timestamp() * 1000)}"


@pytest.mark.parametrize(
    ("kcql", "needs_ids", "expected"),
    [
        (KEYLESS, None, DEFAULT_ID),  # the default key fields and the event time
        (KEYLESS, lambda _: True, DEFAULT_ID),
        (KEYLESS, lambda _: False, "t/0/5"),  # a store that appends: the Kafka coordinates
        (WITH_PK, lambda _: False, "d1"),  # a PK is always derived (and checked)
    ],
)
def test_an_id_is_derived_where_it_is_used(kcql: str, needs_ids: object, expected: str) -> None:
    routed = Router(parse(kcql), needs_ids).route([record("t", 0, 5, aggregate("d1", 0))])  # type: ignore[arg-type]
    assert [item.id for item in routed.items] == [expected]
    assert routed.items[0].document["device_id"] == "d1"


def test_a_missing_pk_is_still_unroutable_when_the_store_needs_no_ids() -> None:
    routed = Router(parse(WITH_PK), lambda _: False).route([record("t", 0, 5, {"window_start": 0})])
    assert not routed.items and len(routed.unroutable) == 1
