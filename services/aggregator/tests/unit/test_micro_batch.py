"""The watermark and window arithmetic of the routing, without Spark."""

from __future__ import annotations

from fluxgate_aggregator.micro_batch import closing_ends, horizon_ms, next_watermark
from fluxgate_aggregator.settings import AggregatorSettings, WindowSettings

S = 1_000


def settings(
    size: str, slide: str | None = None, watermark: str = "5 seconds", dedup: str = "1 second"
) -> AggregatorSettings:
    return AggregatorSettings(window=WindowSettings(size=size, slide=slide, watermark=watermark, dedup_horizon=dedup))


def test_the_watermark_follows_the_latest_event_minus_the_delay_and_never_moves_back() -> None:
    assert next_watermark(0, 60 * S, 5 * S) == 55 * S
    assert next_watermark(55 * S, 40 * S, 5 * S) == 55 * S
    assert next_watermark(55 * S, None, 5 * S) == 55 * S


def test_closing_ends_are_those_the_watermark_passes_at_or_before_its_new_value() -> None:
    tumbling = settings("10 seconds")
    assert closing_ends(tumbling, 0, 9 * S) is None
    assert closing_ends(tumbling, 0, 10 * S) == (10 * S, 10 * S)
    assert closing_ends(tumbling, 10 * S, 35 * S) == (20 * S, 30 * S)
    assert closing_ends(tumbling, 10 * S, 19 * S) is None


def test_hopping_windows_end_at_a_multiple_of_the_slide_plus_the_size() -> None:
    hopping = settings("20 seconds", slide="15 seconds")  # windows [-15,5), [0,20), [15,35), [30,50)
    assert closing_ends(hopping, 0, 20 * S) == (5 * S, 20 * S)
    assert closing_ends(hopping, 20 * S, 50 * S) == (35 * S, 50 * S)
    assert closing_ends(hopping, 20 * S, 34 * S) is None


def test_the_ledger_keeps_readings_for_an_open_window_and_for_copies() -> None:
    assert horizon_ms(settings("1 minute", watermark="30 seconds")) == 60 * S
    assert horizon_ms(settings("10 seconds", watermark="30 seconds")) == 30 * S
    # A copy redelivered after a gateway's outage is still recognised (not written late).
    assert horizon_ms(settings("10 seconds", watermark="30 seconds", dedup="2 minutes")) == 120 * S
    assert horizon_ms(AggregatorSettings()) == 120 * S
