"""batch.size under every target topic's max.message.bytes."""

from __future__ import annotations

from fluxgate_core.batches import LIBRDKAFKA_BATCH_SIZE, batch_size_within


def test_no_known_limit_keeps_the_configured_size() -> None:
    assert batch_size_within([]) == LIBRDKAFKA_BATCH_SIZE
    assert batch_size_within([], 500_000) == 500_000


def test_the_smallest_limit_wins_with_headroom() -> None:
    assert batch_size_within([1_048_588, 65_536]) == 65_536 - 4096
    assert batch_size_within([2_000_000]) == LIBRDKAFKA_BATCH_SIZE  # a larger limit never grows it


def test_a_tiny_limit_still_gives_a_valid_size() -> None:
    assert batch_size_within([10]) == 10
    assert batch_size_within([0]) == 1
