"""Hostile inputs for the gateways, each with the one right outcome.

Both gateways' tests run this table (in-process through their converters, and a subset
through the real service): every case is either dead-lettered with a reason that
contains ``reason``, or accepted as exactly ``readings``. The routing context is the
same everywhere: device ``dev-h``, metric ``temperature`` when the payload says neither.
Sizes are against :data:`LIMITS` (small, so that "at the limit" cases stay small), except
the deep cases', which need the bytes of 100,000 levels to reach a parser (:data:`DEEP_LIMITS`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import cbor2

from fluxgate_core.limits import DEFAULT_MAX_PAYLOAD_BYTES, PayloadLimits
from fluxgate_core.payloads import PayloadFormat

DEVICE, METRIC = "dev-h", "temperature"
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
NOW = -1  # "the ingest time": what a reading without a time of its own gets
LIMITS = PayloadLimits(max_bytes=2048, max_readings=10, max_output_bytes=8192)
# As deep as the parser CVEs' proofs nested: CVE-2026-26209 (cbor2 < 5.9.0, uncontrolled
# recursion) used about 100,000 nested arrays. Far past Python's recursion limit (1,000).
DEEP = 100_000
# A byte limit an operator may set (FLUXGATE_*_LIMITS__MAX_BYTES) that lets every deep case
# through to the parser: the default (256 KiB) refuses the 5-byte JSON levels by size first.
DEEP_LIMITS = PayloadLimits(max_bytes=1024 * 1024, max_readings=10, max_output_bytes=8192)
# CoAP Content-Format per parser (number has none of its own: text/plain, auto).
CONTENT_FORMATS: dict[str, int | None] = {"auto": 50, "senml": 110, "cbor": 60, "senml-cbor": 112}

Reading = tuple[str, str, float, str | None, int]  # device, metric, value, unit, event time (ms)


@dataclass(frozen=True)
class Case:
    """One input and its outcome: ``reason`` (dead-lettered) or ``readings`` (accepted)."""

    name: str
    payload: bytes
    reason: str | None = None
    readings: tuple[Reading, ...] = ()
    fmt: PayloadFormat = "auto"
    # Parsed fine, refused for the bytes of records it becomes: by the gateways' converters.
    refused_as_records: bool = False
    limits: PayloadLimits = LIMITS  # what the gateway is configured with for this case

    @property
    def accepted(self) -> bool:
        return self.reason is None


def ok(name: str, payload: bytes, *readings: Reading, fmt: PayloadFormat = "auto") -> Case:
    return Case(name, payload, readings=readings, fmt=fmt)


def bad(name: str, payload: bytes, reason: str, fmt: PayloadFormat = "auto", limits: PayloadLimits = LIMITS) -> Case:
    return Case(name, payload, reason=reason, fmt=fmt, limits=limits)


def js(document: Any) -> bytes:
    return json.dumps(document, allow_nan=True).encode()


def temp(value: float, when: int = NOW, device: str = DEVICE, unit: str | None = "Cel") -> Reading:
    return (device, METRIC, value, unit, when)


def _sizes() -> list[Case]:
    at_limit = js({"temperature": 1.5}) + b" " * (LIMITS.max_bytes - len(js({"temperature": 1.5})))
    over = LIMITS.max_bytes + 1
    return [
        bad("empty", b"", "not valid JSON"),
        bad("one space", b" ", "not valid JSON"),
        ok("one digit", b"7", temp(7.0)),
        bad("one brace", b"{", "not valid JSON"),
        bad("one NUL", b"\x00", "not valid JSON"),
        bad("one 0xff", b"\xff", "not UTF-8"),
        ok("exactly at the byte limit", at_limit, temp(1.5)),
        bad("one byte over the limit", at_limit + b" ", f"{over} bytes, over the limit of {LIMITS.max_bytes}"),
        bad("far over the limit", b"[" * 100_000, "over the limit"),
        bad("over the limit, CBOR", cbor2.dumps({"temperature": "x" * 4000}), "over the limit", fmt="cbor"),
        ok(
            "readings at the limit",
            js({f"m{i}": i for i in range(10)}),
            *((DEVICE, f"m{i}", float(i), None, NOW) for i in range(10)),
        ),
        bad("readings over the limit", js({f"m{i}": i for i in range(11)}), "more than 10 readings"),
        bad("SenML pack over the readings limit", js([{"v": i} for i in range(50)]), "more than 10 readings"),
        bad("SenML CBOR pack of 500", cbor2.dumps([{2: 1}] * 500), "more than 10 readings", fmt="senml-cbor"),
        # A string field is an attribute of every reading: 1.9 KB in, about 19 KB of records out.
        Case(
            "string field times every reading",
            js({"note": "x" * 1800, **{f"m{i}": i for i in range(10)}}),
            reason="over the limit of 8192 bytes",
            refused_as_records=True,
        ),
        ok(
            "string field times every reading, within the output limit",
            js({"note": "x" * 600, **{f"m{i}": i for i in range(10)}}),
            *((DEVICE, f"m{i}", float(i), None, NOW) for i in range(10)),
        ),
    ]


def _encodings() -> list[Case]:
    good = js({"temperature": 21.5})
    invalid_utf8 = [b"\x80", b"\xc3\x28", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc", b"\xc0\xaf", b"\xed\xa0\x80",
                    b"\xf8\x88\x80\x80\x80", b"\xfe\xff"]  # fmt: skip
    cases = [bad(f"invalid UTF-8 {raw.hex()}", b'{"x":"' + raw + b'","temperature":1}', "not UTF-8")
             for raw in invalid_utf8]  # fmt: skip
    return [
        *cases,
        ok("UTF-8 BOM", b"\xef\xbb\xbf" + good, temp(21.5)),
        bad("two UTF-8 BOMs", b"\xef\xbb\xbf\xef\xbb\xbf" + good, "not valid JSON"),
        bad("UTF-16 LE with BOM", "\ufeff".encode("utf-16-le") + good.decode().encode("utf-16-le"), "not UTF-8"),
        bad("UTF-16 BE with BOM", "\ufeff".encode("utf-16-be") + good.decode().encode("utf-16-be"), "not UTF-8"),
        bad("UTF-32", good.decode().encode("utf-32"), "not UTF-8"),
        bad("NUL after the document", good + b"\x00", "not valid JSON"),
        bad("NUL before the document", b"\x00" + good, "not valid JSON"),
        bad("raw NUL in a string", b'{"sensorId":"a\x00b","temperature":1}', "not valid JSON"),
        bad("escaped NUL in the device id", js({"sensorId": "a\u0000b", "temperature": 1}), "control character"),
        bad("escaped lone surrogate in the device id", b'{"sensorId":"\\ud800","temperature":1}', "lone surrogate"),
        bad("control character in the device id", js({"sensorId": "a\u0085b", "temperature": 1}), "control"),
        ok("unicode device id", js({"sensorId": "capteur-é-水", "temperature": 3}), temp(3.0, device="capteur-é-水")),
        ok("emoji device id", js({"sensorId": "🌡️", "temperature": 3}), temp(3.0, device="🌡️")),
        bad("device id too long", js({"sensorId": "d" * 257, "temperature": 1}), "over 256"),
        ok("device id at 256", js({"sensorId": "d" * 256, "temperature": 1}), temp(1.0, device="d" * 256)),
        bad("unicode metric name", js({"température": 1}), "not a valid metric name"),
        bad("latin-1 text", '{"temperature": 1, "x": "é"}'.encode("latin-1"), "not UTF-8"),
        ok("whitespace around", b" \t\r\n" + good + b"\n ", temp(21.5)),
        bad("form feed around", b"\x0c" + good, "not valid JSON"),
    ]


def _nesting() -> list[Case]:
    return [
        bad("nested arrays", b"[" * 1020 + b"]" * 1020, "nested too deeply"),
        bad("nested objects", b'{"":' * 400 + b"1" + b"}" * 400, "no numeric field"),
        bad("nested arrays 50", b"[" * 50 + b"]" * 50, "SenML record 0 is not an object"),
        bad("object in an object", js({"temperature": {"v": 1}}), "no numeric field"),
        bad("array of arrays", js([[1]]), "SenML record 0 is not an object"),
        bad("deep CBOR", b"\x81" * 1000 + b"\x01", "not valid CBOR", fmt="cbor"),
    ]


def _deep() -> list[Case]:
    """Nesting past any recursion limit: each a dead letter (a PayloadError saying why), never a
    RecursionError or a crash. cbor2 stops at the parser's depth limit (its max_depth, 5.9.0 on);
    Python's json raises RecursionError at the recursion limit, which the parser turns into a
    PayloadError."""
    n, cbor, json_ = DEEP, "not valid CBOR: maximum container nesting depth (64) exceeded", "nested too deeply"

    def deep(name: str, payload: bytes, reason: str, fmt: PayloadFormat = "auto") -> Case:
        return bad(f"{name} nested {n}", payload, reason, fmt, DEEP_LIMITS)

    deepest = DEFAULT_MAX_PAYLOAD_BYTES // 2  # as deep as the gateways' default byte limit lets in
    return [
        deep("CBOR arrays", b"\x81" * n + b"\x01", cbor, "cbor"),
        deep("CBOR arrays as SenML", b"\x81" * n + b"\x01", cbor, "senml-cbor"),
        deep("CBOR maps", b"\xa1\x61a" * n + b"\x01", cbor, "cbor"),
        deep("CBOR maps as SenML", b"\x81" + b"\xa1\x02" * n + b"\x01", cbor, "senml-cbor"),
        deep("CBOR indefinite arrays", b"\x9f" * n + b"\xff" * n, cbor, "cbor"),
        deep("CBOR indefinite maps", b"\xbf\x61a" * n + b"\x01" + b"\xff" * n, cbor, "cbor"),
        deep("CBOR tags", b"\xd8\x64" * n + b"\x01", cbor, "cbor"),
        deep("CBOR self-describe tags", b"\xd9\xd9\xf7" * n + b"\x01", cbor, "senml-cbor"),
        deep("CBOR in a map value", b"\xa2\x6btemperature\x01\x61x" + b"\x81" * n + b"\x01", cbor, "cbor"),
        deep("JSON arrays", b"[" * n + b"]" * n, json_),
        deep("JSON arrays as a number", b"[" * n + b"]" * n, json_, "number"),
        deep("JSON objects", b'{"a":' * n + b"1" + b"}" * n, json_),
        deep("JSON objects as JSON", b'{"a":' * n + b"1" + b"}" * n, json_, "json"),
        deep("JSON in a field", b'{"temperature": 1, "x": ' + b"[" * n + b"]" * n + b"}", json_),
        deep("SenML JSON records", b'[{"v":' * n + b"1" + b"}]" * n, json_, "senml"),
        deep("SenML JSON value", b'[{"n": "t", "v": 1, "vs": ' + b"[" * n + b"]" * n + b"}]", json_, "senml"),
        bad("CBOR arrays to the default limit", b"\x81" * (2 * deepest - 1) + b"\x01", cbor, "cbor", PayloadLimits()),
        bad("JSON arrays to the default limit", b"[" * deepest + b"]" * deepest, json_, limits=PayloadLimits()),
    ]


def _numbers() -> list[Case]:
    spellings = ["NaN", "-NaN", "Infinity", "-Infinity", "+Infinity", "nan", "inf", "-inf", "Inf", "INF",
                 "infinity", "NAN", "1e400", "-1e400"]  # fmt: skip
    cases = []
    for spelling in spellings:
        legal = spelling in ("NaN", "Infinity", "-Infinity", "1e400", "-1e400")  # what Python's json reads
        reason = "not finite" if legal else "not valid JSON"
        cases.append(bad(f"{spelling} as the value", f'{{"temperature": {spelling}}}'.encode(), reason))
        cases.append(bad(f"{spelling} bare", spelling.encode(), reason))
        cases.append(bad(f"{spelling} in SenML v", f'[{{"n":"t","v":{spelling}}}]'.encode(), reason))
        cases.append(bad(f'"{spelling}" as a string', f'{{"temperature": "{spelling}"}}'.encode(), "no numeric field"))
    for value in (math.nan, math.inf, -math.inf):
        cases.append(bad(f"CBOR {value}", cbor2.dumps({"temperature": value}), "not finite", fmt="cbor"))
        cases.append(bad(f"CBOR half-float {value}", b"\xa1\x6btemperature" + _half(value), "not finite", fmt="cbor"))
    return [
        *cases,
        bad("value as a string", js({"value": "21.5", "metric": "temperature"}), "value: expected a number"),
        bad("only numbers as strings", js({"temperature": "21.5"}), "no numeric field"),
        bad("value true", js({"value": True}), "expected a number, got True"),
        bad("value null", js({"value": None}), "expected a number, got None"),
        bad("value list", js({"value": [1]}), "expected a number"),
        bad("bare true", b"true", "unsupported payload"),
        bad("bare null", b"null", "unsupported payload"),
        bad("bare string", b'"21.5"', "unsupported payload"),
        bad("bare object empty", b"{}", "no numeric field"),
        bad("booleans only", js({"on": True, "off": False}), "no numeric field"),
        ok("1e308", b"1e308", temp(1e308)),
        ok("-0.0", b"-0.0", temp(-0.0)),
        ok("5e-324", b"5e-324", temp(5e-324)),
        ok("integer 2**53+1", js({"temperature": 2**53 + 1}), temp(float(2**53 + 1))),
        ok("integer of 300 digits", js({"temperature": 10**300}), temp(1e300)),
        bad("integer of 400 digits", js({"temperature": 10**400}), "too large for a double"),
        bad("integer of 2000 digits", b'{"temperature": ' + b"9" * 2000 + b"}", "too large for a double"),
        bad("CBOR bignum beyond a double", cbor2.dumps({"temperature": 2**2000}), "too large for a double", fmt="cbor"),
        ok("CBOR bignum", cbor2.dumps({"temperature": 2**70}), temp(float(2**70)), fmt="cbor"),
        bad("duplicate keys", b'{"temperature": 1, "temperature": 2}', "duplicate key 'temperature'"),
        bad("duplicate device ids", b'{"sensorId": "a", "sensorId": "b", "t": 1}', "duplicate key 'sensorId'"),
        bad("duplicate keys nested", b'[{"v": 1, "v": 2}]', "duplicate key 'v'"),
        bad("seq as a string", js({"seq": "1", "temperature": 1}), "seq: expected an integer"),
        bad("seq as a float", js({"seq": 1.5, "temperature": 1}), "seq: expected an integer"),
        bad("seq beyond 64 bits", js({"seq": 2**64, "temperature": 1}), "does not fit a 64-bit integer"),
        bad("device id as a list", js({"sensorId": [1], "temperature": 1}), "sensorId: expected a string"),
        ok("device id as a number", js({"sensorId": 42, "temperature": 1}), temp(1.0, device="42")),
        bad("unit as an object", js({"unit": {}, "temperature": 1}), "unit: expected a string"),
        ok("unit as given", js({"unit": "degF", "temperature": 70}), temp(70.0, unit="degF")),
        bad("trailing comma", b'{"temperature": 1,}', "not valid JSON"),
        bad("single quotes", b"{'temperature': 1}", "not valid JSON"),
        bad("comment", b'{"temperature": 1 /* c */}', "not valid JSON"),
        bad("two documents", b'{"temperature": 1}{"temperature": 2}', "not valid JSON"),
        bad("hex number", b'{"temperature": 0x10}', "not valid JSON"),
        bad("leading zero", b'{"temperature": 012}', "not valid JSON"),
        bad("leading plus", b'{"temperature": +1}', "not valid JSON"),
    ]


def _half(value: float) -> bytes:
    return {True: b"\xf9\x7e\x00"}.get(math.isnan(value)) or (b"\xf9\x7c\x00" if value > 0 else b"\xf9\xfc\x00")


def _times() -> list[Case]:
    def at(when: Any) -> bytes:
        return js({"timestamp": when, "temperature": 1})

    shapes = {
        "2023-11-14T22:13:20Z": T0, "2023-11-14T22:13:20+00:00": T0, "2023-11-14T23:13:20+01:00": T0,
        "2023-11-14T22:13:20.000Z": T0, "2023-11-14T22:13:20.123Z": T0 + 123, "2023-11-14 22:13:20Z": T0,
        "20231114T221320Z": T0, "2023-11-14T22:13:20": T0, "2023-11-14T22:13:20,5Z": T0 + 500,
        "2023-11-14T17:13:20-05:00": T0, "2023-11-14": T0 - 80_000_000, "20231114": T0 - 80_000_000,
        "2023-W46-2": T0 - 80_000_000, "2023-11-14T22:13Z": T0 - 20_000, "2023-11-14T22Z": T0 - 800_000,
    }  # fmt: skip
    invalid = ["2023-318", "22:13:20", "T22:13", "2023-11-14T24:00:00Z", "2023-13-01", "2023-02-30",
               "14/11/2023", "Tue, 14 Nov 2023 22:13:20 GMT", "", "now", "1700000000", "+002023-11-14",
               "2023-11-14T22:13:20+25:00", "2023-11-14T22:13:20Z\x00"]  # fmt: skip
    return [
        *(ok(f"ISO {shape}", at(shape), temp(1.0, when)) for shape, when in shapes.items()),
        *(bad(f"not ISO {shape!r}", at(shape), "not an ISO-8601 time") for shape in invalid),
        ok("epoch seconds", at(T0 // 1000), temp(1.0, T0)),
        ok("epoch seconds with fraction", at(T0 / 1000 + 0.25), temp(1.0, T0 + 250)),
        ok("epoch milliseconds", at(T0), temp(1.0, T0)),
        ok("epoch milliseconds, float", at(T0 + 0.4), temp(1.0, T0)),
        bad("epoch microseconds", at(T0 * 1000), "more than a day ahead"),
        bad("zero", at(0), "before the year 2000"),
        bad("negative", at(-1), "before the year 2000"),
        bad("negative milliseconds", at(-T0), "before the year 2000"),
        bad("1999 in ms", at(946_684_799_999), "before the year 2000"),
        ok("2000 in ms", at(946_684_800_000), temp(1.0, 946_684_800_000)),
        bad("year 2100", at("2100-01-01T00:00:00Z"), "more than a day ahead"),
        bad("year 9999", at("9999-12-31T23:59:59Z"), "more than a day ahead"),
        bad("year 0001", at("0001-01-01T00:00:00Z"), "before the year 2000"),
        bad("far future seconds", at(10**10), "more than a day ahead"),
        bad("1e300", at(1e300), "more than a day ahead"),
        bad("time NaN", b'{"timestamp": NaN, "temperature": 1}', "timestamp: value nan is not finite"),
        bad("time true", at(True), "timestamp: expected a number"),
        bad("time null", at(None), "timestamp: expected a number"),
        bad("time object", at({"s": 1}), "timestamp: expected a number"),
    ]


def _senml() -> list[Case]:
    def senml(*records: dict[str, Any]) -> bytes:
        return js(list(records))

    t0 = T0 / 1000
    return [
        bad("empty pack", b"[]", "empty SenML pack"),
        bad("empty CBOR pack", cbor2.dumps([]), "empty SenML pack", fmt="senml-cbor"),
        bad("pack of empty records", senml({}, {}), "no numeric value"),
        bad("string values only", senml({"n": "s", "vs": "on"}), "no numeric value"),
        bad("boolean values only", senml({"n": "s", "vb": True}), "no numeric value"),
        ok(
            "base name and time",
            senml({"bn": "urn:dev:x:", "bt": t0, "n": "temp", "u": "Cel", "v": 20}),
            ("urn:dev:x", METRIC, 20.0, "Cel", T0),
        ),
        ok(
            "base value", senml({"bn": "d:", "bv": 10, "bt": t0, "n": "temp", "v": 1.5}), ("d", METRIC, 11.5, "Cel", T0)
        ),
        ok(
            "base value with name only",
            senml({"bn": "d:", "bv": 10, "bt": t0, "n": "temp"}),
            ("d", METRIC, 10.0, "Cel", T0),
        ),
        ok(
            "base unit carried",
            senml({"bn": "d:", "bu": "%RH", "bt": t0, "n": "hum", "v": 40}, {"n": "rh", "v": 41}),
            ("d", "humidity", 40.0, "%RH", T0),
            ("d", "humidity", 41.0, "%RH", T0),
        ),
        ok(
            "time offsets",
            senml({"bn": "d:", "bt": t0, "n": "temp", "v": 1}, {"n": "temp", "t": 1, "v": 2}),
            ("d", METRIC, 1.0, "Cel", T0),
            ("d", METRIC, 2.0, "Cel", T0 + 1000),
        ),
        ok(
            "unknown unit kept",
            senml({"bn": "d:", "bt": t0, "n": "temp", "u": "furlong", "v": 1}),
            ("d", METRIC, 1.0, "furlong", T0),
        ),
        ok("name with device", senml({"n": "dev-9/temp", "t": t0, "v": 3}), ("dev-9", METRIC, 3.0, "Cel", T0)),
        ok("no name: routing fills in", senml({"t": t0, "v": 3}), temp(3.0, T0)),
        ok(
            "vs records skipped",
            senml({"bn": "d:", "bt": t0, "n": "s", "vs": "x"}, {"n": "temp", "v": 5}),
            ("d", METRIC, 5.0, "Cel", T0),
        ),
        bad("v as a string", senml({"n": "temp", "v": "1"}), "SenML record 0 v: expected a number"),
        bad("bt as a string", senml({"bt": "2023", "n": "temp", "v": 1}), "bt: expected a number"),
        bad("t overflowing", senml({"bt": 1e308, "n": "temp", "t": 1e308, "v": 1}), "out of range"),
        bad("record not an object", js([1, 2]), "SenML record 0 is not an object"),
        bad("must-understand field", senml({"n": "temp", "v": 1, "foo_": 1}), "must-understand field 'foo_'"),
        bad("bn as a number object", senml({"bn": {}, "n": "temp", "v": 1}), "bn: expected a string"),
        bad("n as a list", senml({"n": ["x"], "v": 1}), "n: expected a string"),
        bad("negative absolute time", senml({"bt": -t0, "n": "temp", "v": 1}), "before the year 2000"),
        bad("far future time", senml({"bt": 4e9, "n": "temp", "v": 1}), "more than a day ahead"),
        bad("bad metric name", senml({"n": "tem perature", "t": t0, "v": 1}), "not a valid metric name"),
        bad("SenML as the wrong format", js({"temperature": 1}), "expected a SenML pack", fmt="senml"),
        ok(
            "CBOR labels",
            cbor2.dumps([{-2: "d:", -3: t0, 0: "temp", 1: "Cel", 2: 21.0}]),
            ("d", METRIC, 21.0, "Cel", T0),
            fmt="senml-cbor",
        ),
        ok(
            "CBOR self-describe tag", b"\xd9\xd9\xf7" + cbor2.dumps([{-3: t0, 2: 4.0}]), temp(4.0, T0), fmt="senml-cbor"
        ),
        bad(
            "CBOR unknown tag as value", cbor2.dumps([{2: cbor2.CBORTag(99, 1)}]), "expected a number", fmt="senml-cbor"
        ),
        bad(
            "CBOR epoch tag as time",
            b"\x81\xa2\x02\x01\x06\xc1\x1a\x65\x53\xf1\x00",
            "expected a number",
            fmt="senml-cbor",
        ),
        bad(
            "CBOR decimal fraction",
            cbor2.dumps([{2: cbor2.CBORTag(4, [-1, 215])}]),
            "expected a number",
            fmt="senml-cbor",
        ),
        bad("CBOR undefined", b"\x81\xa1\x02\xf7", "expected a number", fmt="senml-cbor"),
        bad("CBOR bytes as name", cbor2.dumps([{0: b"temp", 2: 1}]), "expected a string", fmt="senml-cbor"),
        bad("CBOR map, not a pack", cbor2.dumps({2: 1}), "expected a SenML pack", fmt="senml-cbor"),
        bad("CBOR truncated", cbor2.dumps([{2: 1.5}])[:-2], "not valid CBOR", fmt="senml-cbor"),
        bad("CBOR huge declared length", b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff", "not valid CBOR", fmt="cbor"),
        bad("CBOR huge byte string", b"\x5b\x00\x00\x00\x10\x00\x00\x00\x00", "not valid CBOR", fmt="cbor"),
        bad("CBOR trailing garbage", cbor2.dumps({"temperature": 1}) + b"\xff", "not valid CBOR", fmt="cbor"),
        bad("CBOR break alone", b"\xff", "not valid CBOR", fmt="cbor"),
        bad("CBOR int map keys", cbor2.dumps({1: 2.0}), "object key 1 is not a string", fmt="cbor"),
        bad("CBOR bignum key", cbor2.dumps({2**3000: 2.0}), "an integer of 3001 bits", fmt="cbor"),
        bad("CBOR text", cbor2.dumps("21.5"), "unsupported payload", fmt="cbor"),
        ok(
            "CBOR map",
            cbor2.dumps({"sensorId": "c1", "timestamp": T0, "temperature": 2.5}),
            temp(2.5, T0, device="c1"),
            fmt="cbor",
        ),
        ok("CBOR indefinite map", b"\xbf\x6btemperature\xf9\x3e\x00\xff", temp(1.5), fmt="cbor"),
        ok("CBOR bare number", cbor2.dumps(2.5), temp(2.5), fmt="cbor"),
        bad("CBOR bare true", cbor2.dumps(True), "unsupported payload", fmt="cbor"),
        bad("CBOR empty", b"", "not valid CBOR", fmt="cbor"),
    ]


def cases() -> list[Case]:
    """Every payload case (both gateways); topic shapes are the MQTT tests' own."""
    return [*_sizes(), *_encodings(), *_nesting(), *_deep(), *_numbers(), *_times(), *_senml()]
