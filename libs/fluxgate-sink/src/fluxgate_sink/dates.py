"""Date patterns of WITHINDEXSUFFIX, e.g. ``-{YYYY.MM.dd}``.

Date patterns in WITHINDEXSUFFIX mean what the people who write them mean, not what Java's
DateTimeFormatter would make of them: inside ``{...}`` ``YYYY``/``yyyy`` is the calendar year,
``MM`` the month, ``DD``/``dd`` the day of the month, ``HH`` the hour (00-23), ``mm`` the minutes;
``-``, ``.`` and ``_`` stay as they are, and so does everything outside the braces.
DateTimeFormatter reads ``YYYY`` as the week-based year and ``DD`` as the day of the year, which
would file 2025-12-29 under ``2026.12.363``: the wrong index around New Year and on every day
after the 31st of January. Times are converted to UTC first; a naive datetime is taken as UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

from fluxgate_sink.errors import KcqlError

_STRFTIME = {"YYYY": "%Y", "yyyy": "%Y", "MM": "%m", "DD": "%d", "dd": "%d", "HH": "%H", "mm": "%M"}
_DATE_TOKEN = re.compile(r"YYYY|yyyy|MM|DD|dd|HH|mm|[-._]|([A-Za-z]+|.)")
_BRACES = re.compile(r"\{([^{}]*)\}|[{}]")


def format_date_pattern(pattern: str, when: datetime) -> str:
    """``pattern`` with each ``{...}`` date pattern filled in from ``when`` in UTC (see the module doc)."""
    try:
        return utc(when).strftime(strftime_format(pattern))
    except PatternError as exc:
        raise KcqlError(f"index suffix {pattern!r}: {exc.why}") from exc


class PatternError(Exception):
    """Where (``offset`` in the pattern) and why a date pattern is wrong."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(why)
        self.offset, self.why = offset, why


@lru_cache(maxsize=4096)
def suffix(pattern: str, year: int, month: int, day: int, hour: int, minute: int) -> str:
    return format_date_pattern(pattern, datetime(year, month, day, hour, minute, tzinfo=UTC))


@lru_cache(maxsize=256)
def strftime_format(pattern: str) -> str:
    """The strftime format that means what ``pattern`` means; PatternError says where it is wrong."""
    parts, end = [], 0
    for brace in _BRACES.finditer(pattern):
        parts.append(pattern[end : brace.start()].replace("%", "%%"))
        end = brace.end()
        if brace.group(1) is None:
            raise PatternError(brace.start(), f"unbalanced '{brace.group()}'")
        if not brace.group(1):
            raise PatternError(brace.start(), "empty {}: put a date pattern such as {YYYY.MM.dd} inside")
        for token in _DATE_TOKEN.finditer(brace.group(1)):
            if token.group(1) is not None:
                why = f"unknown date field '{token.group(1)}'; use YYYY, MM, DD, HH, mm and - . _"
                raise PatternError(brace.start(1) + token.start(), why)
            parts.append(_STRFTIME.get(token.group(), token.group()))
    return "".join(parts) + pattern[end:].replace("%", "%%")


def utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive datetime is taken as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
