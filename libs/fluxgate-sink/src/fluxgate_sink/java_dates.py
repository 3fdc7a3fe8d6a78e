"""Java ``SimpleDateFormat`` patterns (the ``format`` of Kafka's TimestampConverter), in UTC as the
transform sets its format's zone: formatting a datetime and parsing a text.

The letters real configs use are read: ``y M d H h m s S a E Z X z`` and ``'quoted text'``.
Any other letter is refused when the pattern is read (:class:`DatePatternError`), never guessed.
Parsing follows ``DateFormat.parse(String)``: the text must start with the pattern, and what
follows it is ignored; unlike the lenient Java default, an out-of-range field (month 13) is an
error rather than rolled into the next month.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache

_TOKEN = re.compile(r"'((?:[^']|'')*)'|([A-Za-z])\2*|(.)", re.DOTALL)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_NUMERIC = frozenset("yMdHhmsS")
_ZONE = r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?|UTC|GMT)"


class DatePatternError(ValueError):
    """A pattern letter this reader does not know, or a text that does not match the pattern."""


@dataclass(frozen=True)
class _Field:
    letter: str
    count: int


Token = _Field | str  # a field, or literal text


@lru_cache(maxsize=64)
def tokens(pattern: str) -> tuple[Token, ...]:
    """``pattern`` as fields and literal text; DatePatternError names an unknown letter."""
    out: list[Token] = []
    for match in _TOKEN.finditer(pattern):
        quoted, letter, other = match.groups()
        if quoted is not None:
            out.append(quoted.replace("''", "'") or "'")
        elif letter is not None:
            if letter not in "yMdHhmsSaEZXz":
                raise DatePatternError(f"pattern letter {letter!r} is not supported (use y M d H h m s S a E Z X z)")
            out.append(_Field(letter, len(match.group())))
        else:
            out.append(other)
    return tuple(out)


def format_datetime(pattern: str, when: datetime) -> str:
    """``when`` (in UTC) written with ``pattern``."""
    when = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return "".join(
        token if isinstance(token, str) else _FORMAT[token.letter](when, token.count) for token in tokens(pattern)
    )


def parse_datetime(pattern: str, text: str) -> datetime:
    """The UTC datetime ``text`` starts with, read with ``pattern``."""
    match = _regex(pattern).match(text)
    if match is None:
        raise DatePatternError(f"value ({text}) does not match pattern ({pattern})")
    found = {name: value for name, value in match.groupdict().items() if value is not None}
    try:
        return _assemble(found)
    except ValueError as exc:
        raise DatePatternError(f"value ({text}) is not a valid date for pattern ({pattern}): {exc}") from exc


def _pad(value: int, count: int) -> str:
    return str(value).zfill(count)


def _year(when: datetime, count: int) -> str:
    return _pad(when.year % 100, 2) if count == 2 else _pad(when.year, count)


def _month(when: datetime, count: int) -> str:
    name = _MONTHS[when.month - 1]
    return name if count >= 4 else name[:3] if count == 3 else _pad(when.month, count)


def _zone(when: datetime, count: int, letter: str) -> str:
    if letter == "z":
        return "UTC"
    if letter == "X":  # ISO 8601: UTC is Z
        return "Z"
    return "+0000"


_FORMAT: dict[str, Callable[[datetime, int], str]] = {
    "y": _year,
    "M": _month,
    "d": lambda w, n: _pad(w.day, n),
    "H": lambda w, n: _pad(w.hour, n),
    "h": lambda w, n: _pad((w.hour % 12) or 12, n),
    "m": lambda w, n: _pad(w.minute, n),
    "s": lambda w, n: _pad(w.second, n),
    "S": lambda w, n: _pad(w.microsecond // 1000, n),  # S is milliseconds, however many letters
    "a": lambda w, n: "AM" if w.hour < 12 else "PM",
    "E": lambda w, n: _DAYS[w.weekday()] if n >= 4 else _DAYS[w.weekday()][:3],
    "Z": lambda w, n: _zone(w, n, "Z"),
    "X": lambda w, n: _zone(w, n, "X"),
    "z": lambda w, n: _zone(w, n, "z"),
}


@lru_cache(maxsize=64)
def _regex(pattern: str) -> re.Pattern[str]:
    found = tokens(pattern)
    parts: list[str] = []
    for index, token in enumerate(found):
        if isinstance(token, str):
            parts.append(re.escape(token))
            continue
        following = found[index + 1] if index + 1 < len(found) else None
        abutting = isinstance(following, _Field) and following.letter in _NUMERIC
        parts.append(_field_regex(token, abutting))
    return re.compile("".join(parts), re.IGNORECASE)


def _field_regex(token: _Field, abutting: bool) -> str:
    letter, count = token.letter, token.count
    name = {"h": "hour12"}.get(letter, letter)
    if letter in "ZXz":
        return _ZONE
    if letter == "a":
        return r"(?P<a>AM|PM)"
    if letter == "E":
        return r"[A-Za-z]+"
    if letter == "M" and count >= 3:
        return r"(?P<Mname>[A-Za-z]+)"
    # Java reads as many digits as there are, unless the next field is numeric too (yyyyMMdd).
    digits = rf"\d{{{count}}}" if abutting else r"\d+"
    return rf"(?P<{name}>{digits})"


def _assemble(found: dict[str, str]) -> datetime:
    year = int(found.get("y", "1970"))
    if len(found.get("y", "")) == 2:  # Java's window: within 80 years before and 20 after now
        now = datetime.now(UTC).year
        year += (now - 80) // 100 * 100
        year += 100 if year < now - 80 else 0
    month = int(found["M"]) if "M" in found else _month_number(found.get("Mname", "January"))
    hour = int(found.get("H", "0"))
    if "hour12" in found:
        hour = int(found["hour12"]) % 12 + (12 if found.get("a", "").upper() == "PM" else 0)
    millis = int(found.get("S", "0"))
    when = datetime(year, month, int(found.get("d", "1")), hour, int(found.get("m", "0")), int(found.get("s", "0")))
    return (when + timedelta(milliseconds=millis)).replace(tzinfo=_offset(found.get("zone"))).astimezone(UTC)


def _month_number(name: str) -> int:
    for number, month in enumerate(_MONTHS, start=1):
        if month.lower().startswith(name.lower()) and len(name) >= 3:
            return number
    raise ValueError(f"unknown month {name!r}")


def _offset(zone: str | None) -> timezone:
    if zone is None or zone.upper() in ("Z", "UTC", "GMT"):
        return UTC
    digits = zone[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:] or "0")
    return timezone(timedelta(minutes=minutes if zone[0] == "+" else -minutes))
