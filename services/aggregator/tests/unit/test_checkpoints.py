from __future__ import annotations

import pytest

from fluxgate_aggregator.checkpoints import is_abandoned_temp_file, location


@pytest.mark.parametrize(
    ("checkpoint_dir", "want"),
    [
        (".local/checkpoints/aggregator", ".local/checkpoints/aggregator/aggregates"),
        ("/data/ckpt/", "/data/ckpt/aggregates"),
        ("s3a://bucket/fluxgate", "s3a://bucket/fluxgate/aggregates"),
        ("hdfs://namenode:8020/ckpt", "hdfs://namenode:8020/ckpt/aggregates"),
    ],
)
def test_a_query_checkpoint_keeps_the_uri_intact(checkpoint_dir: str, want: str) -> None:
    assert location(checkpoint_dir, "aggregates") == want


@pytest.mark.parametrize(
    ("name", "abandoned"),
    [
        (".0.2b6115e8-153b-4908-b9cc-8d3353f7d622.tmp", True),
        ("..0.2b6115e8-153b-4908-b9cc-8d3353f7d622.tmp.crc", True),
        ("0", False),
        (".0.crc", False),
        ("12", False),
    ],
)
def test_only_unrenamed_log_entries_are_abandoned(name: str, abandoned: bool) -> None:
    assert is_abandoned_temp_file(name) is abandoned
