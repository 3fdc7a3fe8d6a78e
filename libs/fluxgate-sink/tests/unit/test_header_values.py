"""A header's text reads as Kafka Connect's SimpleHeaderConverter reads it (Values.parseString, apache/kafka
4.4). Every expected value below is what the connect-api 4.4.0 jar gives for the same text (run with its
JVM in UTC), in Python's terms: a Java float as the double it widens to, a Date, Time or Timestamp as a
date, time or UTC datetime."""

from __future__ import annotations

import math
import struct
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fluxgate_sink.connect_tokens import trim
from fluxgate_sink.header_values import Unrepresentable, header_value, parse_string


def f32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


PARSED: list[tuple[str, str, Any]] = [
    ("an empty text is the empty string", "", ""),
    ("lowercase true is a boolean", "true", True),
    ("false with blanks around it is a boolean", " false\t", False),
    ("uppercase TRUE is text", "TRUE", "TRUE"),
    ("true followed by more is text", "true}", "true}"),
    ("null is None", "null", None),
    ("a small number is an int", "42", 42),
    ("a negative number with blanks is an int", " -7 ", -7),
    ("a plus sign is allowed", "+5", 5),
    ("leading zeros are dropped", "007", 7),
    ("digits of another script are a number", "\u0661\u0662\u0663", 123),
    ("the largest long is an int", "9223372036854775807", 2**63 - 1),
    ("one past the largest long is a decimal", "9223372036854775808", Decimal("9223372036854775808")),
    ("a whole number with a fraction of zeros is an int", "1.0", 1),
    ("an exponent that makes a whole number is an int", "1e3", 1000),
    ("a negative exponent that leaves a whole number is an int", "100e-2", 1),
    ("a fraction is the nearest float32", "0.1", f32(0.1)),
    ("one and a half is a float32", "1.5", 1.5),
    ("a fraction with many digits loses them to float32", "123456789.123", 123456792.0),
    ("a point and digits after a minus are a number", "-.5", -0.5),
    ("a point first is text", ".5", ".5"),
    ("1e19 is past a long yet a float32 for its exponent", "1e19", f32(1e19)),
    ("twenty digits without an exponent are a decimal", "10000000000000000000", Decimal("10000000000000000000")),
    ("a number past float32 is a double", "1e39", 1e39),
    ("a number past double is a decimal", "1e400", Decimal("1e400")),
    ("NaN is text", "NaN", "NaN"),
    ("Infinity is text", "-Infinity", "-Infinity"),
    ("hexadecimal is text", "0x10", "0x10"),
    ("underscores between digits are text", "1_000", "1_000"),
    ("an exponent past a Java int is text", "1e2147483648", "1e2147483648"),
    ("a word is text", "mqtt-0", "mqtt-0"),
    ("text keeps its blanks", " gw 1 ", " gw 1 "),
    ("quotes at the top level are part of the text", '"quoted"', '"quoted"'),
    ("only the first of comma separated numbers counts", "1,2,3", 1),
    ("a number before a colon is that number", "1:2", 1),
    ("a number before a stray bracket is that number", "5]", 5),
    ("an iso date is a date", "2026-11-23", date(2026, 11, 23)),
    ("a date reads months past twelve into the next year", "2024-13-01", date(2025, 1, 1)),
    ("a date reads days past the month into the next one", "2024-02-30", date(2024, 3, 1)),
    ("a date ignores what follows it within its length", "2024-1-1xx", date(2024, 1, 1)),
    ("a date before the Gregorian reform is a Julian one", "1582-10-04", date(1582, 10, 14)),
    ("a date of another length is text", "2024-1-1", "2024-1-1"),
    ("a time with milliseconds and Z is a time", "12:34:56.789Z", time(12, 34, 56, 789000)),
    ("a time with escaped colons is a time", "12\\:34\\:56.789Z", time(12, 34, 56, 789000)),
    ("a timestamp is a UTC datetime", "2026-11-23T12:34:56.789Z", datetime(2026, 11, 23, 12, 34, 56, 789000, UTC)),
    ("a timestamp without milliseconds is text", "2026-11-23T12:34:56Z", "2026-11-23T12:34:56Z"),
    ("a list of numbers is a list", "[1,2]", [1, 2]),
    ("a list of an int and a float is of floats", "[1, 2.5]", [1.0, 2.5]),
    ("a list of a long and a float is of float32s", "[16777217, 0.5]", [16777216.0, 0.5]),
    ("a list of mixed types keeps each", '["a", 1, true]', ["a", 1, True]),
    ("a list of nulls is a list of None", "[null,null]", [None, None]),
    ("a list with a null among numbers is text", "[1,null]", "[1,null]"),
    ("an empty list is a list", "[ ]", []),
    ("a trailing comma in a list is allowed", "[1,]", [1]),
    ("a list without its bracket is text", "[1,2", "[1,2"),
    ("nested lists widen at their own level only", "[[1],[2.5]]", [[1], [2.5]]),
    ("a quoted string in a list keeps its backslash", '["a\\"b"]', ['a\\"b']),
    ("a quoted date in a list is a date", '["2024-01-01"]', [date(2024, 1, 1)]),
    ("a quoted number in a list is text", '["1.5"]', ["1.5"]),
    ("numbers in a list with a date are days", "[2024-01-01,5]", [date(2024, 1, 1), date(1970, 1, 6)]),
    ("a date after a number too wide for days is text", "[2024-01-01,100000]", "[2024-01-01,100000]"),
    (
        "a number in a list with a time is milliseconds",
        "[12:34:56.789Z,5]",
        [time(12, 34, 56, 789000), time(0, 0, 0, 5000)],
    ),
    ("a list of a date and a float is text", "[2024-01-01,1.5]", "[2024-01-01,1.5]"),
    ("a map of a string and a number is a dict", '{"a":1}', {"a": 1}),
    ("a map's numbers widen together", '{"a":1,"b":2.5}', {"a": 1.0, "b": 2.5}),
    ("a map without commas between entries is a dict", '{"a":1 "b":2}', {"a": 1, "b": 2}),
    ("a map of a null value alone is a dict", '{"a":null}', {"a": None}),
    ("a map with a null among numbers is text", '{"a":1,"b":null}', '{"a":1,"b":null}'),
    ("a map keyed by numbers is a dict", '{1:"a",2:"b"}', {1: "a", 2: "b"}),
    ("a map keeps the last of a repeated key in the first place", '{"a":1,"b":2,"a":3}', {"a": 3, "b": 2}),
    ("a map of lists is a dict of lists", '{"k":[1,2]}', {"k": [1, 2]}),
    ("a map without its brace is text", '{"a":1', '{"a":1'),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in PARSED], ids=[case[0] for case in PARSED])
def test_a_header_text_reads_as_kafka_connect_reads_it(text: str, expected: Any) -> None:
    found = parse_string(text)
    assert found == expected
    assert type(found) is type(expected)
    if isinstance(expected, float):
        assert math.copysign(1, found) == math.copysign(1, expected)


def test_a_negative_number_too_small_for_float32_is_negative_zero() -> None:
    found = parse_string("-1e-50")
    assert found == 0.0 and math.copysign(1, found) == -1.0


UNREPRESENTABLE = [
    ("midnight at the end of a day", "24:00:00.000Z", "time of day"),
    ("a lenient time past a day", "99:99:99.999Z", "time of day"),
    ("the first Julian day of year one, which is in year zero", "0001-01-01", "years 1 to 9999"),
    ("a map keyed by 1 and true", '{1:"a",true:"b"}', "keeps apart"),
    ("a map keyed by a list", '{[1]:"a"}', "keyed by a list"),
]


@pytest.mark.parametrize(
    ("text", "reason"), [case[1:] for case in UNREPRESENTABLE], ids=[case[0] for case in UNREPRESENTABLE]
)
def test_a_value_python_cannot_hold_is_refused_naming_why(text: str, reason: str) -> None:
    with pytest.raises(Unrepresentable, match=reason):
        parse_string(text)


def test_a_list_kafka_connect_then_refuses_is_text_even_if_an_element_has_no_python_value() -> None:
    assert parse_string("[99:99:99.999Z, x]") == "[99:99:99.999Z, x]"


def test_header_bytes_are_utf8_with_malformed_sequences_replaced_and_null_is_none() -> None:
    assert header_value(b"\xffgw") == "\ufffdgw"
    assert header_value(b"42") == 42
    assert header_value(None) is None


def test_brackets_nested_past_the_parsers_depth_give_the_bytes_as_kafka_connect_does() -> None:
    # SimpleHeaderConverter catches the parser's StackOverflowError and hands over the bytes.
    deep = b"[" * 5000 + b"]" * 5000
    assert header_value(deep) == deep


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_any_integer_written_as_text_comes_back_as_that_number(number: int) -> None:
    found = parse_string(str(number))
    assert found == number
    assert type(found) is (int if -(2**63) <= number < 2**63 else Decimal)


# An odd 24-bit significand times a negative power of two: every float32 with a fraction (a whole
# one's text is a whole number, an int of the text's digits, not the float).
FRACTIONAL_FLOAT32 = st.builds(
    math.ldexp, st.integers(-(2**23), 2**23 - 1).map(lambda n: 2 * n + 1), st.integers(-149, -1)
)


@settings(max_examples=300, deadline=None)
@given(FRACTIONAL_FLOAT32)
def test_any_fractional_float32_written_as_its_shortest_text_comes_back_as_that_value(number: float) -> None:
    assert f32(number) == number
    assert parse_string(repr(number)) == number


LETTERS = st.characters(categories=["Lu", "Ll"])


@settings(max_examples=300, deadline=None)
@given(LETTERS, st.text())
def test_text_that_starts_with_a_letter_comes_back_unchanged(first: str, rest: str) -> None:
    text = first + rest
    assume(trim(text) not in ("null", "true", "false"))
    assert parse_string(text) == text
