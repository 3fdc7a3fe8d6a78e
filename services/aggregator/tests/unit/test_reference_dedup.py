"""The reference aggregation counts a reading once, however many copies arrive."""

from __future__ import annotations

from aggregator_reference import distinct_readings, expected_aggregates, reading

BASE_MS = 1_767_225_600_000


def test_copies_count_once_and_other_values_or_sequences_are_other_readings() -> None:
    first = reading("d1", BASE_MS + 1_000, 20.0)
    numbered = {**reading("d1", BASE_MS + 2_000, 21.0), "sequence": 1}
    records = [
        first,
        dict(first),  # a resend
        reading("d1", BASE_MS + 1_000, 20.5),  # same millisecond, another value
        numbered,
        {**numbered, "sequence": 2},
        dict(numbered),  # a redelivery
    ]
    assert distinct_readings(records) == [records[0], records[2], records[3], records[4]]
    (window,) = expected_aggregates(records, 10_000, 10_000).values()
    assert window["count"] == 4
    assert window["mean"] == (20.0 + 20.5 + 21.0 + 21.0) / 4
