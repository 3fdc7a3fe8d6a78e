"""Device payloads into measurements: JSON objects, bare numbers, SenML (JSON and CBOR), CBOR maps.

Both gateways receive the same kinds of payloads, so parsing lives here. A parser
returns every measurement a payload holds, or raises :class:`PayloadError` saying
what is wrong; it never guesses silently.
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import cbor2

from fluxgate_core.errors import PayloadError
from fluxgate_core.limits import DEFAULT_LIMITS, PayloadLimits

# CoAP Content-Format numbers (IANA registry).
CF_TEXT, CF_JSON, CF_CBOR, CF_SENML_JSON, CF_SENML_CBOR = 0, 50, 60, 110, 112
PayloadFormat = Literal["auto", "json", "number", "senml", "cbor", "senml-cbor"]

# SenML CBOR labels (RFC 8428 section 6).
_SENML_CBOR_LABELS = {-1: "bver", -2: "bn", -3: "bt", -4: "bu", -5: "bv", -6: "bs",
                      0: "n", 1: "u", 2: "v", 3: "vs", 4: "vb", 5: "s", 6: "t", 7: "ut", 8: "vd"}  # fmt: skip
# SenML times below 2**28 are relative to now (RFC 8428 section 4.5.3).
_SENML_RELATIVE_LIMIT = 2**28
_CBOR_SELF_DESCRIBE = 55799  # RFC 8949 section 3.4.6: a magic number, not a meaning
# Deeper CBOR is no device's payload (a SenML pack is three levels, a tag or two more): cbor2
# refuses it by count (max_depth, 5.9.0 on, the fix of CVE-2026-26209), long before Python's
# recursion limit. JSON has no such option: Python's json raises RecursionError at the
# recursion limit, which _load_json turns into a PayloadError.
_CBOR_MAX_DEPTH = 64


NO_ATTRIBUTES: Mapping[str, str] = MappingProxyType({})  # a read-only default, safe to share


class Measurement(NamedTuple):
    """One value a payload carried; fields the payload did not say are None.

    A named tuple rather than a frozen dataclass: one is built per reading, several times faster.
    """

    value: float
    metric: str | None = None
    unit: str | None = None
    time_ms: int | None = None
    device_id: str | None = None
    sequence: int | None = None
    attributes: Mapping[str, str] = NO_ATTRIBUTES


@dataclass(frozen=True, slots=True)
class JsonFields:
    """Which keys of a JSON/CBOR object mean what; every other numeric key is a metric."""

    device: str = "sensorId"
    time: str = "timestamp"
    sequence: str = "seq"
    unit: str = "unit"
    metric: str = "metric"
    value: str = "value"
    # Asked for every object: built once with the names, not per call.
    _reserved: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = (self.device, self.time, self.sequence, self.unit, self.metric, self.value)
        object.__setattr__(self, "_reserved", frozenset(names))

    def reserved(self) -> frozenset[str]:
        return self._reserved


def parse_payload(
    payload: bytes,
    fmt: PayloadFormat = "auto",
    fields: JsonFields = JsonFields(),
    limits: PayloadLimits = DEFAULT_LIMITS,
) -> list[Measurement]:
    """Parse ``payload`` in format ``fmt`` (``auto``: JSON object, JSON number or SenML array).

    Any bytes give measurements or a :class:`PayloadError`, never another exception.
    """
    limits.check_size(payload)
    measurements = _parse(payload, fmt, fields, limits)
    limits.check_count(len(measurements))
    return measurements


def _parse(payload: bytes, fmt: PayloadFormat, fields: JsonFields, limits: PayloadLimits) -> list[Measurement]:
    if fmt in ("cbor", "senml-cbor"):
        return _from_document(_load_cbor(payload), fields, limits, senml_only=fmt == "senml-cbor")
    document = _load_json(payload)
    if type(document) is dict and (fmt == "auto" or fmt == "json"):  # what devices mostly send
        return parse_object(document, fields)
    if fmt == "number" and not _is_number(document):
        raise PayloadError(f"expected a bare number, got {type(document).__name__}")
    if fmt == "senml" and not isinstance(document, list):
        raise PayloadError("expected a SenML pack (a JSON array)")
    if fmt == "json" and not isinstance(document, (dict, int, float)):
        raise PayloadError(f"expected a JSON object or number, got {type(document).__name__}")
    return _from_document(document, fields, limits, senml_only=False)


def load_document(payload: bytes, fmt: PayloadFormat = "auto") -> Any:
    """The payload's document (a JSON or CBOR value) as ``fmt`` reads it: for what the readings
    leave out, such as the payload fields a KCQL WITHKEY names; a PayloadError if it has none."""
    return _load_cbor(payload) if fmt in ("cbor", "senml-cbor") else _load_json(payload)


def format_for_content_format(content_format: int | None) -> PayloadFormat:
    """The parser a CoAP Content-Format asks for (auto-detection when absent or textual)."""
    formats: dict[int, PayloadFormat] = {CF_CBOR: "cbor", CF_SENML_CBOR: "senml-cbor", CF_SENML_JSON: "senml"}
    return formats.get(content_format if content_format is not None else -1, "auto")


def _load_json(payload: bytes) -> Any:
    try:
        # Decode ourselves: json.loads(bytes) would guess UTF-16/32 from garbage bytes.
        # A UTF-8 BOM is allowed (RFC 8259 section 8.1 lets a parser ignore it); without one,
        # the plain codec (in C) gives the same text and errors as the "-sig" one (in Python).
        text = payload.decode("utf-8-sig" if payload[:3] == _BOM else "utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"payload is not UTF-8 text: {exc}") from exc
    document = _object_alone(text)
    if document is not _NOT_ALONE:
        return document
    try:
        return _JSON.decode(text)
    except RecursionError as exc:
        raise PayloadError("payload is not valid JSON: nested too deeply") from exc
    except ValueError as exc:  # also Python's limit on the digits of an integer
        raise PayloadError(f"payload is not valid JSON: {exc}") from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # The last duplicate silently winning would be a guess about what the device meant.
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise PayloadError(f"payload is not valid JSON: duplicate key {_show(duplicate)}")
    return document


_JSON = json.JSONDecoder(object_pairs_hook=_unique_keys)  # json.loads would build one per call
_SCAN: Callable[[str, int], tuple[Any, int]] = _JSON.scan_once  # type: ignore[attr-defined]  # set by __init__, not in typeshed
_BOM = b"\xef\xbb\xbf"
_NOT_ALONE = object()


def _object_alone(text: str) -> Any:
    """The object ``text`` holds when it is exactly one, without surrounding whitespace (what
    devices send): the C scanner alone, without ``decode``'s whitespace regexes in Python,
    which take as long as the scanning. Anything else, errors included, is ``_NOT_ALONE``:
    ``_JSON.decode`` then says what it says of it."""
    if text[:1] != "{" or text[-1:] != "}":
        return _NOT_ALONE
    try:
        document, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return _NOT_ALONE
    return document if end == len(text) else _NOT_ALONE


def _load_cbor(payload: bytes) -> Any:
    stream = io.BytesIO(payload)
    try:
        document = cbor2.CBORDecoder(stream, max_depth=_CBOR_MAX_DEPTH).decode()
    except Exception as exc:  # cbor2 raises several unrelated types on garbage
        raise PayloadError(f"payload is not valid CBOR: {exc}") from exc
    if stream.tell() != len(payload):  # cbor2.loads would ignore what follows the first item
        raise PayloadError(f"payload is not valid CBOR: {len(payload) - stream.tell()} bytes after the data item")
    while isinstance(document, cbor2.CBORTag) and document.tag == _CBOR_SELF_DESCRIBE:
        document = document.value
    return document


def _from_document(document: Any, fields: JsonFields, limits: PayloadLimits, *, senml_only: bool) -> list[Measurement]:
    if type(document) is dict and not senml_only:  # what devices mostly send: no ABC check for Mapping
        return parse_object(document, fields)
    if isinstance(document, (list, tuple)):  # cbor2 gives tuples inside tags
        return parse_senml(document, limits)
    if senml_only:
        raise PayloadError("expected a SenML pack (an array)")
    if _is_number(document):
        return [Measurement(value=_finite(document, "payload"))]
    if isinstance(document, Mapping):
        return parse_object(document, fields)
    raise PayloadError(f"unsupported payload: a {type(document).__name__}, not an object, number or array")


def parse_object(document: Mapping[Any, Any], fields: JsonFields = JsonFields()) -> list[Measurement]:
    """``{"sensorId": "S4", "timestamp": 1486997194029, "temperature": 23.6}`` style objects."""
    # Run once per message: what devices send (string keys, float values, a string device)
    # is tested first, inline; everything else goes through the general checks below.
    reserved = fields._reserved
    attributes: dict[str, str] = {}
    numeric: list[tuple[str, Any]] = []
    for key, value in document.items():  # one pass: every key is looked at once, per message
        if key in reserved:  # all strings: a key of another type is never in it
            continue
        if type(key) is not str:
            if not isinstance(key, str):  # only CBOR can do this; its keys would not survive str() as names
                raise PayloadError(f"object key {_show(key)} is not a string")
            key = str(key)
        if type(value) is float:
            numeric.append((key, value))
        elif isinstance(value, str):
            attributes[key] = value
        elif _is_number(value):
            numeric.append((key, value))
    device = _string_field(document, fields.device)
    time_ms = parse_time(document[fields.time], fields.time) if fields.time in document else None
    sequence = document.get(fields.sequence)
    if sequence is not None:
        sequence = _optional_int(sequence, fields.sequence)
    unit = _string_field(document, fields.unit)
    if fields.value in document:
        metric = _optional_str(document.get(fields.metric), fields.metric)
        value = _finite(document[fields.value], fields.value)
        return [Measurement(value, metric, unit, time_ms, device, sequence, attributes)]
    if not numeric:
        raise PayloadError(f"no numeric field in object with keys {sorted(map(str, document))}")
    return [
        Measurement(
            v if type(v) is float and math.isfinite(v) else _finite(v, k),
            k,
            unit,
            time_ms,
            device,
            sequence,
            attributes,
        )
        for k, v in numeric
    ]


def _string_field(document: Mapping[Any, Any], name: str) -> str | None:
    value = document.get(name)
    return value if type(value) is str and value else _optional_str(value, name)


def parse_senml(pack: Sequence[Any], limits: PayloadLimits = DEFAULT_LIMITS) -> list[Measurement]:
    """Resolve a SenML pack (RFC 8428): base name/time/unit/value carried forward."""
    if not pack:
        raise PayloadError("empty SenML pack")
    base: dict[str, Any] = {"bn": "", "bt": 0.0, "bu": None, "bv": 0.0}
    measured: list[Measurement] = []
    for index, raw in enumerate(pack):
        if not isinstance(raw, Mapping):
            raise PayloadError(f"SenML record {index} is not an object")
        record = _senml_record(raw, index)
        for key in ("bn", "bt", "bu", "bv"):
            if key in record:
                base[key] = record[key]
        if "v" in record or ("bv" in record and "n" in record):
            measured.append(_senml_measurement(record, base, index))
            limits.check_count(len(measured))  # early: do not resolve 50,000 records to refuse them
    if not measured:
        raise PayloadError("SenML pack has no numeric value (only vs/vb/vd records are not readings)")
    return measured


def _senml_record(raw: Mapping[Any, Any], index: int) -> dict[str, Any]:
    record = {str(_SENML_CBOR_LABELS.get(k, k)) if isinstance(k, int) else str(k): v for k, v in raw.items()}
    # RFC 8428 section 4.4: a field ending in "_" must be understood, or the pack refused.
    must_understand = sorted(key for key in record if key.endswith("_"))
    if must_understand:
        raise PayloadError(f"SenML record {index}: unsupported must-understand field {_show(must_understand[0])}")
    return record


def _senml_measurement(record: dict[str, Any], base: dict[str, Any], index: int) -> Measurement:
    where = f"SenML record {index}"
    value = _finite(record.get("v", 0.0), f"{where} v") + _finite(base["bv"], f"{where} bv")
    seconds = _finite(base["bt"], f"{where} bt") + _finite(record.get("t", 0.0), f"{where} t")
    if abs(seconds) < _SENML_RELATIVE_LIMIT:
        seconds += time.time()
    if not math.isfinite(seconds * 1000):  # bt + t can overflow even when both are finite
        raise PayloadError(f"{where}: time {seconds!r} s is out of range")
    base_name = _optional_str(base["bn"], "bn") or ""
    name = _optional_str(record.get("n"), f"{where} n") or ""
    device, metric = _split_senml_name(base_name, name)
    unit = _optional_str(record.get("u", base["bu"]), f"{where} u")
    return Measurement(value=value, metric=metric, unit=unit, time_ms=round(seconds * 1000), device_id=device)


def _split_senml_name(base_name: str, name: str) -> tuple[str | None, str | None]:
    """Base name identifies the device (``urn:dev:ow:10e2073a:``), name the metric (``temp``)."""
    if base_name:
        return base_name.rstrip(":/") or None, name or None
    for separator in (":", "/"):
        if separator in name:
            device, _, metric = name.rpartition(separator)
            return device or None, metric or None
    return None, name or None


def parse_time(raw: Any, where: str) -> int:
    """Epoch milliseconds from epoch seconds, milliseconds, or an ISO-8601 string."""
    if type(raw) is int and 1e11 <= raw < 2**53:  # milliseconds, as a double holds them: round(float(raw)) is raw
        return raw
    if isinstance(raw, str):
        if not (raw.isascii() and raw.isprintable()):  # fromisoformat lets a trailing NUL through
            raise PayloadError(f"{where}: not an ISO-8601 time: {_show(raw)}")
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError as exc:
            raise PayloadError(f"{where}: not an ISO-8601 time: {raw[:64]!r}") from exc
        # Without an offset, the server's own zone would decide the value: devices mean UTC.
        return round((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp() * 1000)
    number = _finite(raw, where)
    # Devices send seconds or milliseconds; 1e11 s is the year 5138, 1e11 ms is 1973.
    return round(number * 1000) if abs(number) < 1e11 else round(number)


def _is_number(value: Any) -> bool:
    # Asked several times per message: a float answers at once, and isinstance with a tuple
    # is faster than with a union type (Python 3.11).
    return type(value) is float or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _finite(value: Any, where: str) -> float:
    if type(value) is float and math.isfinite(value):  # the usual value, already what the rest would return
        return value
    if not _is_number(value):
        raise PayloadError(f"{where}: expected a number, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError as exc:  # a CBOR bignum beyond a double
        raise PayloadError(f"{where}: value {_show(value)} is too large for a double") from exc
    if not math.isfinite(number):
        raise PayloadError(f"{where}: value {_show(value)} is not finite")
    return number


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    if _is_number(value) and not _huge(value):
        return str(value)
    raise PayloadError(f"{where}: expected a string, got {_show(value)}")


def _optional_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise PayloadError(f"{where}: expected an integer, got {_show(value)}")


def _huge(value: Any) -> bool:
    return isinstance(value, int) and value.bit_length() > 64


def _show(value: Any) -> str:
    """A value for an error message: short, and safe for integers too long for ``repr``."""
    if _huge(value):
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 64 else f"{text[:60]}...({type(value).__name__} of {len(text)} characters)"
