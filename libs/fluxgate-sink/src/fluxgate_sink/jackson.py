"""JSON text read as Kafka Connect reads it: with Jackson, where Python's ``json`` would read the
same bytes differently.

Kafka Connect's ``JsonDeserializer`` (apache/kafka ``connect/json/src/main/java/org/apache/kafka/
connect/json/JsonDeserializer.java``) parses a record with Jackson's ``ObjectMapper.readTree``, the
``JsonReadFeature.ALLOW_LEADING_ZEROS_FOR_NUMBERS`` feature on (KAFKA-15012, 2023) and
``JsonConverter`` asking for ``USE_BIG_DECIMAL_FOR_FLOATS`` (``JsonConverter.java``'s constructor).
Checked against Jackson 2.21.7, the one Kafka 4.4.0 ships, Python's ``json`` reads the same values
(a duplicate key keeps its last value, NaN and Infinity are not JSON, a UTF-8 BOM is skipped and
UTF-16 and UTF-32 are detected from the bytes, invalid UTF-8 is refused) except:

- ``readTree`` reads the first value and never looks at what follows it (``FAIL_ON_TRAILING_TOKENS``
  is off), so ``{"a":1} x`` is ``{"a":1}`` and ``1 2`` is 1; Python's ``json`` refuses "Extra data";
- a number may have leading zeros (``007`` is 7, ``-00.5`` is -0.5), where Python refuses them;
- no content at all, or only whitespace, is Jackson's ``MissingNode`` (:data:`MISSING`), which
  JsonConverter reads as a null without schemas; Python refuses it;
- non-integral numbers are BigDecimals, exact: :func:`loads` can give :class:`~decimal.Decimal`
  for them where a schema asks for a Decimal.

The first three are tried only once Python's fast parser has refused the text, so a record that
is plain JSON costs what ``json.loads`` costs.

Where we differ on purpose: Jackson reads up to 1000 levels of nesting
(``StreamReadConstraints.maxNestingDepth``) and numbers of up to 1000 digits (``maxNumberLength``);
Python's parser stops at its recursion limit (a little under 1000 levels, fewer deep in a call
stack), which is :class:`SerializationError` here (the record is dead-lettered, never a crash), and
reads longer numbers (an integer up to 4300 digits), which Connect would dead-letter: no reading
holds one, and counting digits would cost every record.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any, Final

from fluxgate_core.errors import SerializationError

MISSING: Final = object()  # no JSON value in the text: Jackson's MissingNode
_WHITESPACE = " \t\n\r"  # JSON's, the only characters Jackson skips between tokens
_DIGITS = frozenset("0123456789")
# A JSON string (skipped as it is) or the leading zeros of a number: zeros at the start of a
# number token (not after a digit, a letter as in an exponent, or a decimal point) that another
# digit follows. ``-?`` keeps the sign.
_LEADING_ZEROS = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![\w.+-])(-?)0+(?=\d)')


def loads(data: bytes | str, *, leading_zeros: bool, exact_decimals: bool = False) -> Any:
    """The first JSON value of ``data`` as Jackson reads it (:data:`MISSING` when there is none);
    ``exact_decimals`` reads non-integral numbers as Decimal. Raises SerializationError."""
    decoder = _EXACT if exact_decimals else _DOUBLES
    try:
        # What json.loads does with bytes (the encoding detected, a UTF-8 BOM skipped, as Jackson's
        # ByteSourceJsonBootstrapper does), with a decoder made once rather than per record.
        text = data if isinstance(data, str) else data.decode(json.detect_encoding(data), "surrogatepass")
        return _first_value(text, decoder)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        return _lenient(exc, leading_zeros, decoder)
    except ValueError as exc:  # bytes that are not UTF-8 (UnicodeDecodeError), NaN, Infinity
        raise SerializationError(f"not JSON: {exc}") from exc


def _first_value(doc: str, decoder: json.JSONDecoder) -> Any:
    try:
        return decoder.decode(doc)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data" or _zero_then_digit(doc, exc.pos):
            raise
        # exc.pos is where the first value's trailing whitespace ends: Jackson stops there.
        return decoder.decode(doc[: exc.pos])


def _zero_then_digit(doc: str, end: int) -> bool:
    """Whether Python's parser stopped inside a number with leading zeros (``007`` is 0, then
    "Extra data"): that number is one value to Jackson, never a value and what follows it."""
    return doc[end - 1] == "0" and doc[end : end + 1] in _DIGITS


def _lenient(exc: json.JSONDecodeError, leading_zeros: bool, decoder: json.JSONDecoder) -> Any:
    """What Jackson reads from a text Python's parser refused (``exc``), or SerializationError."""
    if not exc.doc.strip(_WHITESPACE):
        return MISSING
    if leading_zeros:
        rewritten = _LEADING_ZEROS.sub(_drop_zeros, exc.doc)
        if rewritten != exc.doc:
            try:
                return _first_value(rewritten, decoder)
            except RecursionError:
                raise _too_deep() from None
            except ValueError:
                pass  # not JSON for another reason: say the first one
    raise SerializationError(f"not JSON: {exc}") from exc


def _drop_zeros(match: re.Match[str]) -> str:
    sign = match.group(1)
    return match.group(0) if sign is None else sign  # None: the match is a string


def _too_deep() -> SerializationError:
    return SerializationError(
        "not JSON Fluxgate reads: nested too deep for Python's parser (about 900 levels; Kafka Connect "
        "reads up to 1000)"
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Jackson: ALLOW_NON_NUMERIC_NUMBERS is off by default


# Shared as json.loads shares its own default decoder: decoding keeps no state between calls.
_DOUBLES = json.JSONDecoder(parse_constant=_no_constant)
_EXACT = json.JSONDecoder(parse_constant=_no_constant, parse_float=Decimal)
