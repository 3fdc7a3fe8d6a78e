"""The routing's horizon arithmetic, without Spark (each device's watermark is
``device_clocks``', tested on Spark against the reference model)."""

from __future__ import annotations

from fluxgate_aggregator.micro_batch import horizon_ms
from fluxgate_aggregator.settings import AggregatorSettings, WindowSettings

S = 1_000


def settings(
    size: str, slide: str | None = None, watermark: str = "5 seconds", dedup: str = "1 second"
) -> AggregatorSettings:
    return AggregatorSettings(window=WindowSettings(size=size, slide=slide, watermark=watermark, dedup_horizon=dedup))


def test_the_ledger_keeps_readings_for_an_open_window_and_for_copies() -> None:
    assert horizon_ms(settings("1 minute", watermark="30 seconds")) == 60 * S
    assert horizon_ms(settings("10 seconds", watermark="30 seconds")) == 30 * S
    # A copy redelivered after a gateway's outage is still recognised (not written late).
    assert horizon_ms(settings("10 seconds", watermark="30 seconds", dedup="2 minutes")) == 120 * S
    assert horizon_ms(AggregatorSettings()) == 120 * S
