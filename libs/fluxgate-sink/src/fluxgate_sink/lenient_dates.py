"""Java's ``new SimpleDateFormat(pattern).parse(text, new ParsePosition(0))`` for the three ISO
patterns of Kafka Connect's ``Values`` (apache/kafka 4.4, ``connect/api/.../data/Values.java``:
``ISO_8601_DATE_FORMAT_PATTERN`` and its time and timestamp patterns, read by
``ValueParser.parseAsTemporalType``), as epoch milliseconds in UTC.

A default ``SimpleDateFormat`` is lenient, so this is too: a field may be any integer, negative or
too large, and rolls into the next one (month 13 is January of the next year, ``99:99`` is past
midnight); spaces and tabs before a number are skipped; the text after the pattern is ignored. A
number is read as its ``DecimalFormat`` reads one (Java's default locale, English): an optional
minus, any decimal digits, an exponent after ``E``, ``NaN`` and ``∞``. The calendar is Java's
``GregorianCalendar``: dates before 1582-10-15 are on the Julian calendar, as Java reads them.
``Values`` leaves the zone to the JVM's default; this reads UTC, a Connect worker's usual zone.
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["DATE", "TIME", "TIMESTAMP", "lenient_millis"]

#: The patterns as field letters and literal characters (``T`` and ``Z`` are quoted literals).
DATE, TIME = "y-M-d", "H:m:s.SZ"
TIMESTAMP = f"{DATE}T{TIME}"
_FIELDS = frozenset("yMdHmsS")
_INT = (-(2**31), 2**31 - 1)
_DAY_MS = 86_400_000
_CUTOVER = -141_427  # 1582-10-15, the first Gregorian day, in days since 1970-01-01
_JULIAN_EPOCH_DAY = 2_440_588  # the Julian Day Number of 1970-01-01


def lenient_millis(text: str, pattern: str) -> int | None:
    """Epoch milliseconds of what ``text`` starts with, read with ``pattern``; None if it does not."""
    fields: dict[str, int] = {}
    at = 0
    for part in pattern:
        if part in _FIELDS:
            found = _number(text, at)
            if found is None:
                return None
            fields[part], at = found
        elif text.startswith(part, at):
            at += 1
        else:
            return None
    return _calendar_millis(fields)


def _number(text: str, at: int) -> tuple[int, int] | None:
    """The int value (``Number.intValue()``) of the number at ``at`` and where it ends."""
    while text.startswith((" ", "\t"), at):  # SimpleDateFormat.subParse skips these before a field
        at += 1
    if text.startswith("NaN", at):
        return 0, at + 3
    negative = text.startswith("-", at)
    at += negative
    if text.startswith("∞", at):
        return _INT[0] if negative else _INT[1], at + 1
    digits, at = _digits(text, at)
    if not digits:
        return None
    exponent = 0
    if text.startswith("E", at):  # DecimalFormat reads an exponent even when not asked for one
        minus = text.startswith("-", at + 1)
        power, end = _digits(text, at + 1 + minus)
        if power:
            exponent, at = _wrap(int(power), 32) * (-1 if minus else 1), end
    return _int_value(digits, exponent, negative), at


def _digits(text: str, at: int) -> tuple[str, int]:
    """The decimal digits at ``at`` as ASCII (Character.digit: any script's, of the BMP), and their end."""
    end = at
    while end < len(text) and text[end].isdecimal() and ord(text[end]) <= 0xFFFF:
        end += 1
    return "".join(str(int(char)) for char in text[at:end]), end


def _int_value(digits: str, exponent: int, negative: bool) -> int:
    """DecimalFormat's result (a Long when the value is whole and fits one, else a Double) as intValue()."""
    significant = digits.lstrip("0")
    if not significant:
        return 0
    places = len(significant) + exponent  # digits before the point
    if places > 19:  # beyond a long: a Double, which intValue() saturates
        return _INT[0] if negative else _INT[1]
    if places <= 0:  # below 1: a Double, which intValue() truncates to 0
        return 0
    value = Fraction(int(significant)) * Fraction(10) ** exponent * (-1 if negative else 1)
    if value.denominator == 1 and -(2**63) <= value < 2**63:
        return _wrap(int(value), 32)  # Long.intValue(): the low 32 bits
    double = float(value)
    return _INT[0] if double <= _INT[0] else _INT[1] if double >= _INT[1] else math.trunc(double)


def _calendar_millis(fields: dict[str, int]) -> int:
    """GregorianCalendar.computeTime, lenient, in UTC, from the parsed fields (unset: 1970-01-01 00:00)."""
    year = fields.get("y", 1970)
    month = _wrap(fields.get("M", 1) - 1, 32)  # SimpleDateFormat sets MONTH to value - 1
    day = fields.get("d", 1)
    time_of_day = ((fields.get("H", 0) * 60 + fields.get("m", 0)) * 60 + fields.get("s", 0)) * 1000
    carry, time_of_day = divmod(time_of_day + fields.get("S", 0), _DAY_MS)
    whole_year, month = year + month // 12, month % 12 + 1
    gregorian = carry + _gregorian_days(whole_year, month) + day - 1
    # The calendar is chosen by the YEAR field as given; a Gregorian date before the cutover (the
    # days Gregory skipped included) is read as a Julian one.
    fixed = gregorian if year >= 1582 and gregorian >= _CUTOVER else carry + _julian_days(whole_year, month) + day - 1
    return _wrap(fixed * _DAY_MS + time_of_day, 64)  # Java's long arithmetic


def _gregorian_days(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of ``month`` in ``year``, proleptic Gregorian (any year)."""
    year -= month <= 2
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5
    of_era_days = of_era * 365 + of_era // 4 - of_era // 100 + of_year
    return era * 146_097 + of_era_days - 719_468


def _julian_days(year: int, month: int) -> int:
    """Days from 1970-01-01 (Gregorian) to the first of ``month`` in ``year`` of the Julian calendar."""
    shift = (14 - month) // 12
    years, months = year + 4800 - shift, month + 12 * shift - 3
    julian_day = 1 + (153 * months + 2) // 5 + 365 * years + years // 4 - 32_083
    return julian_day - _JULIAN_EPOCH_DAY


def _wrap(value: int, bits: int) -> int:
    """``value`` as a Java int (32) or long (64) holds it: its low bits, two's complement."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half
