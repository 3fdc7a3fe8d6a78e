"""The filter form's fields: last minutes, and a from/until range read as UTC."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from fluxgate_console.deadletters import LetterFilter
from fluxgate_console.filters import FilterError, letter_filter

NOW_MS = 1_700_000_100_000  # 2023-11-14 22:15:00 UTC
AT_22_13_UTC = 1_699_999_980_000


@pytest.fixture
def away_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The console's machine at UTC+05:30: a time read as local would be hours off."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_an_empty_form_filters_nothing() -> None:
    assert letter_filter({"from": "", "until": " ", "since_min": ""}, NOW_MS) == LetterFilter()


@pytest.mark.usefixtures("away_from_utc")
def test_from_and_until_are_utc_with_or_without_seconds() -> None:
    chosen = letter_filter({"from": "2023-11-14T22:13", "until": "2023-11-14T22:14:59"}, NOW_MS)
    assert (chosen.since_ms, chosen.until_ms) == (AT_22_13_UTC, AT_22_13_UTC + 119_000)


def test_a_time_with_its_own_offset_is_taken_as_it_says() -> None:
    assert letter_filter({"until": "2023-11-15T00:13+02:00"}, NOW_MS).until_ms == AT_22_13_UTC


def test_last_minutes_and_from_together_keep_the_later_start() -> None:
    assert letter_filter({"from": "2023-11-14T22:13", "since_min": "1"}, NOW_MS).since_ms == NOW_MS - 60_000
    assert letter_filter({"from": "2023-11-14T22:13", "since_min": "10"}, NOW_MS).since_ms == AT_22_13_UTC


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"from": "2023-11-14T22:14", "until": "2023-11-14T22:13"}, "until (2023-11-14T22:13) is before from"),
        ({"from": "yesterday"}, "from: 'yesterday' is not a date and time"),
        ({"until": "2023-13-01T00:00"}, "until: '2023-13-01T00:00' is not a date and time"),
        ({"since_min": "-5"}, "last minutes: '-5' is not a number of minutes"),
        ({"since_min": "nan"}, "last minutes: 'nan' is not a number of minutes"),
    ],
)
def test_an_unusable_field_is_named(params: dict[str, str], message: str) -> None:
    with pytest.raises(FilterError, match=re.escape(message)):
        letter_filter(params, NOW_MS)


def test_one_instant_is_a_range_too() -> None:
    chosen = letter_filter({"from": "2023-11-14T22:13", "until": "2023-11-14T22:13"}, NOW_MS)
    assert chosen.since_ms == chosen.until_ms == AT_22_13_UTC
