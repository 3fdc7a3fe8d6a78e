"""Dead letters per key and minute: minute boundaries, the window, the cap on keys; the
sparkline that draws them. Clocks are plain numbers handed in."""

from __future__ import annotations

import re

from fluxgate_console.sparkline import sparkline
from fluxgate_console.timeline import OTHER, Timeline

NOW = 28_333_400  # an epoch minute


def totals(timeline: Timeline) -> dict[str, int]:
    return {row.key: row.total for row in timeline.rows(NOW)}


def test_letters_fall_in_the_minute_of_their_timestamp() -> None:
    timeline = Timeline(keys_kept=4, window=5)
    for ms in (NOW * 60_000 - 1, NOW * 60_000, NOW * 60_000 + 59_999, (NOW - 4) * 60_000):
        timeline.add("a", ms // 60_000, NOW)
    (row,) = timeline.rows(NOW)
    assert row.series == [1, 0, 0, 1, 2]  # oldest first: the window's first minute, then the one before now
    assert (row.total, row.peak) == (4, 2)


def test_minutes_outside_the_window_are_counted_but_not_kept() -> None:
    timeline = Timeline(keys_kept=4, window=5)
    timeline.add("a", NOW - 5, NOW)  # just outside
    timeline.add("a", NOW + 3, NOW)  # a producer clock ahead: counted as now
    (row,) = timeline.rows(NOW)
    assert row.total == 2 and row.series == [0, 0, 0, 0, 1]


def test_old_minutes_leave_as_the_clock_moves_on() -> None:
    timeline = Timeline(keys_kept=4, window=5)
    timeline.add("a", NOW, NOW)
    timeline.add("b", NOW + 4, NOW + 4)
    assert timeline.rows(NOW + 4)[0].series == [1, 0, 0, 0, 0]  # still in: the window's first minute
    timeline.add("b", NOW + 5, NOW + 5)
    assert [row.series for row in timeline.rows(NOW + 5)] == [[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]
    assert timeline.copy()._tallies["a"].minutes == {}  # gone from memory, not only from the view
    assert totals(timeline) == {"a": 1, "b": 2}


def test_keys_beyond_the_cap_are_folded_into_other() -> None:
    timeline = Timeline(keys_kept=2, window=5)
    for key in ("a", "b", "a", "c", "d"):
        timeline.add(key, NOW, NOW)
    assert totals(timeline) == {"a": 2, "b": 1, OTHER: 2}
    assert [row.key for row in timeline.rows(NOW)][-1] == OTHER and timeline.rows(NOW)[-1].is_other


def test_a_quiet_key_gives_its_place_to_a_new_one() -> None:
    timeline = Timeline(keys_kept=2, window=5)
    for key in ("a", "a", "b"):
        timeline.add(key, NOW, NOW)
    timeline.add("b", NOW + 3, NOW + 3)
    timeline.add("c", NOW + 5, NOW + 5)  # "a" has nothing left in the window: "c" takes its place
    assert totals(timeline) == {"b": 2, "c": 1, OTHER: 2}
    timeline.add("d", NOW + 5, NOW + 5)  # nobody quiet now
    assert totals(timeline) == {"b": 2, "c": 1, OTHER: 3}


def test_a_copy_is_independent() -> None:
    timeline = Timeline(keys_kept=2, window=5)
    timeline.add("a", NOW, NOW)
    twin = timeline.copy()
    timeline.add("a", NOW, NOW)
    assert totals(twin) == {"a": 1} and totals(timeline) == {"a": 2}


def test_total_series_adds_every_key_and_is_empty_without_any() -> None:
    timeline = Timeline(keys_kept=1, window=5)
    assert timeline.total_series(NOW, 3) == [0, 0, 0]
    for key, minute in (("a", NOW), ("b", NOW), ("b", NOW - 1)):
        timeline.add(key, minute, NOW)
    assert timeline.total_series(NOW, 3) == [0, 1, 2]


def bars(svg: str) -> list[tuple[int, int]]:
    """(x, height) of each bar."""
    return [(int(x), int(h)) for x, h in re.findall(r'<rect x="(\d+)" y="[\d.]+" width="\d+" height="(\d+)"', svg)]


def test_a_sparkline_has_a_bar_per_minute_with_dead_letters() -> None:
    svg = str(sparkline([0, 4, 0, 1, 2], bar=3, height=16))
    assert svg.startswith('<svg class="spark" width="15" height="16"')
    assert bars(svg) == [(3, 16), (9, 4), (12, 8)]
    assert "<title>4, 3 min ago</title>" in svg and "<title>2, this minute</title>" in svg


def test_rows_drawn_with_one_peak_compare_and_small_counts_stay_visible() -> None:
    assert bars(str(sparkline([1, 2], peak=40, height=16))) == [(0, 2), (3, 2)]
    assert bars(str(sparkline([0, 0]))) == []
