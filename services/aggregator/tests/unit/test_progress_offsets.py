"""The offsets a finished batch processed, as the consumer group commit gets them."""

from __future__ import annotations

from fluxgate_aggregator.offsets import processed


def test_a_kafka_sources_end_offset_becomes_one_commit_per_partition() -> None:
    offsets = processed('{"sensors.readings": {"0": 12, "2": 7, "1": 0}}')
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in offsets) == [
        ("sensors.readings", 0, 12),
        ("sensors.readings", 1, 0),
        ("sensors.readings", 2, 7),
    ]


def test_anything_but_a_kafka_sources_offsets_commits_nothing() -> None:
    for end_offset in (None, "", "not json", "42", '{"logOffset": 3}', '{"t": {"0": -1}}'):
        assert processed(end_offset) == [], end_offset
