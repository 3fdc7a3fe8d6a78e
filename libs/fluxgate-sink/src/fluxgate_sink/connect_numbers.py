"""Numbers as Kafka Connect's ``Values.parseString`` reads them (apache/kafka 4.4,
``connect/api/src/main/java/org/apache/kafka/connect/data/Values.java``: ``ValueParser.parseAsNumber``,
``parseAsExactDecimal``, and ``mergeSchemas`` for the type a list's numbers share), with the Connect
schema :class:`Kind` each value gets. The text must be Java's ``new BigDecimal(String)`` syntax; Python's
own parsers take more (``1_000``, ``inf``, blanks) and are never asked directly.
"""

from __future__ import annotations

import math
import re
import struct
import unicodedata
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Any

__all__ = ["Kind", "big_decimal", "float32", "float32_of_double", "number", "widened"]

_INT32 = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)
_BIGGER_THAN_LONG = Decimal("1e19")
# BigDecimal's own syntax: a sign, digits with at most one point, an exponent of digits; \d is any
# decimal digit, as Java's Character.isDigit (outside the Basic Multilingual Plane refused apart).
_BIG_DECIMAL = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?)(\d+))?")


class Kind(Enum):
    """The Connect schema Values gives a parsed value; a logical type (Decimal, Date, Time,
    Timestamp) merges by its physical type, as ``mergeSchemas`` compares ``Schema.type()``."""

    BOOLEAN = "BOOLEAN"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FLOAT32 = "FLOAT32"
    FLOAT64 = "FLOAT64"
    STRING = "STRING"
    ARRAY = "ARRAY"
    MAP = "MAP"
    DECIMAL = "BYTES"
    DATE = "INT32/Date"
    TIME = "INT32/Time"
    TIMESTAMP = "INT64/Timestamp"

    @property
    def physical(self) -> str:
        return self.value.partition("/")[0]

    @property
    def temporal(self) -> bool:
        return "/" in self.value

    @property
    def numeric(self) -> bool:
        return self.physical in _RANKS


# The order in which mergeSchemas widens one number type into another (commonSchemaForInt8 ...).
_RANKS = {"INT8": 0, "INT16": 1, "INT32": 2, "INT64": 3, "FLOAT32": 4, "FLOAT64": 5}


def widened(previous: Kind, new: Kind) -> Kind | None:
    """The type a list's elements of types ``previous`` and then ``new`` share, None if none.

    Two of one physical type share the newer one (Values.mergeSchemas keeps the later of two required
    schemas, so [Date, int32] is int32 and [int32, Date] is Date); two numbers share the wider."""
    if previous.physical == new.physical:
        return new
    before, after = _RANKS.get(previous.physical), _RANKS.get(new.physical)
    if before is None or after is None:
        return None
    return previous if before > after else new


def big_decimal(text: str) -> Decimal | None:
    """``new BigDecimal(text)``, None where Java throws NumberFormatException."""
    found = _BIG_DECIMAL.fullmatch(text)
    if found is None or not (found[2] or found[3]) or max(text) > "\uffff":
        return None
    sign, whole, fraction, exponent_sign, exponent = found.groups(default="")
    exponent = _ascii(exponent)
    if len(exponent.lstrip("0")) > 10:  # BigDecimal: "Too many nonzero exponent digits"
        return None
    power = int(exponent or "0") * (-1 if exponent_sign == "-" else 1)
    if not _INT32[0] <= power <= _INT32[1] or not _INT32[0] <= len(fraction) - power <= _INT32[1]:
        return None  # the exponent, and the scale it makes, are Java ints
    return Decimal(f"{sign}{_ascii(whole)}.{_ascii(fraction)}E{power}")


def number(decimal: Decimal) -> tuple[Kind, Any]:
    """The typed value of a parsed number (ValueParser.parseAsNumber): a whole one within a long the
    narrowest integer type, else a float32, a float64, then a Decimal, each if it holds the value."""
    exact = _whole(decimal)
    if exact is not None:
        return _integer_kind(exact), exact
    if decimal.as_tuple().exponent != 0:  # a BigDecimal of scale 0 beyond a long stays a Decimal
        single = float32(decimal)
        if math.isfinite(single):
            return Kind.FLOAT32, single
        double = float(decimal)
        if math.isfinite(double):
            return Kind.FLOAT64, double
    return Kind.DECIMAL, decimal


def float32(decimal: Decimal) -> float:
    """BigDecimal.floatValue(): the float32 nearest the exact value (ties to even), as a Python float."""
    if decimal.is_zero():
        return 0.0
    sign = -1.0 if decimal.is_signed() else 1.0
    if decimal.adjusted() > 38:  # past 3.4e38 plus half a step: infinite
        return sign * math.inf
    if decimal.adjusted() < -46:  # below half the smallest subnormal (1.4e-45): zero
        return sign * 0.0
    exact = Fraction(decimal.copy_abs())
    exponent = exact.numerator.bit_length() - exact.denominator.bit_length()
    if Fraction(2) ** exponent > exact:
        exponent -= 1  # now 2**exponent <= exact < 2**(exponent + 1)
    step = Fraction(2) ** max(exponent - 23, -149)  # 24 bits of precision, or a subnormal's spacing
    rounded = round(exact / step) * step  # round() of a Fraction ties to even
    return sign * (math.inf if rounded >= 2**128 else float(rounded))


def float32_of_double(value: float) -> float:
    """Java's ``(float)`` of a double, as a Python float."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _whole(decimal: Decimal) -> int | None:
    """parseAsExactDecimal: the value as an int when it is whole, at most 1e19 and within a long."""
    size = decimal.copy_abs()
    if size > _BIGGER_THAN_LONG or (size < 1 and not decimal.is_zero()):
        return None
    _, digits, exponent = decimal.as_tuple()
    assert isinstance(exponent, int)  # a finite Decimal
    text = "".join(map(str, digits))
    if exponent < 0 and len(text) - len(text.rstrip("0")) < -exponent and not decimal.is_zero():
        return None  # a fraction: stripTrailingZeros() leaves a positive scale
    whole = int(decimal)
    return whole if _LONG[0] <= whole <= _LONG[1] else None


def _integer_kind(value: int) -> Kind:
    for kind, bits in ((Kind.INT8, 7), (Kind.INT16, 15), (Kind.INT32, 31)):
        if -(2**bits) <= value < 2**bits:
            return kind
    return Kind.INT64


def _ascii(digits: str) -> str:
    """Any decimal digits as ASCII ones (Java's Character.digit reads Arabic-Indic, fullwidth ...)."""
    return digits if digits.isascii() else "".join(str(unicodedata.decimal(char)) for char in digits)
