"""A header a SELECT names is read as the sink's header converter (``sink.header_format``) reads it.
Every expected value below is what the connect 4.4.0 jars give for the same bytes: each converter
configured as the worker configures its header converter (``Plugins.newHeaderConverter``: the
``header.converter.*`` keys and ``converter.type=header``), then ``toConnectHeader`` called; a
DataException is a refusal here (Unconvertible), which fails the record naming the header."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from typing import Any

import pytest
from fluxgate_testing.sink.memory import aggregate, record

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_sink.formats import HeaderFormat, header_reader
from fluxgate_sink.header_values import Unconvertible, header_value
from fluxgate_sink.kcql import parse
from fluxgate_sink.kcql_routing import Router
from fluxgate_sink.settings import SinkSettings

ENVELOPE_INT = b'{"schema":{"type":"int32"},"payload":7}'
ENVELOPE_BYTES = b'{"schema":{"type":"bytes"},"payload":"AAE="}'
ENVELOPE_STRUCT = b'{"schema":{"type":"struct","fields":[{"field":"a","type":"int64"}]},"payload":{"a":3}}'
ENVELOPE_TIMESTAMP = b'{"schema":{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp"},"payload":0}'

READ: list[tuple[HeaderFormat, bool, bytes | None, Any]] = [
    # StringConverter: the UTF-8 text, untyped; a malformed sequence as U+FFFD (new String(bytes, UTF_8)).
    ("string", True, b"42", "42"),
    ("string", True, b'{"a":1}', '{"a":1}'),
    ("string", True, b"", ""),
    ("string", True, b"\xffA", "\ufffdA"),
    # ByteArrayConverter: the bytes as they are.
    ("bytearray", True, b"\x00\x01\xfb", b"\x00\x01\xfb"),
    ("bytearray", True, b"", b""),
    # JsonConverter with schemas.enable (its default): the envelope, read through its schema.
    ("json", True, ENVELOPE_INT, 7),
    ("json", True, ENVELOPE_BYTES, b"\x00\x01"),
    ("json", True, ENVELOPE_STRUCT, {"a": 3}),
    ("json", True, ENVELOPE_TIMESTAMP, datetime(1970, 1, 1, tzinfo=UTC)),
    # JsonConverter without: the bare JSON, schemaless (an empty header is null there).
    ("json", False, b"42", 42),
    ("json", False, b"1.5", 1.5),
    ("json", False, b'"x"', "x"),
    ("json", False, b'{"a":1}', {"a": 1}),
    ("json", False, b"[1,2.5]", [1, 2.5]),
    ("json", False, ENVELOPE_INT, {"schema": {"type": "int32"}, "payload": 7}),
    ("json", False, b"", None),
    # The fixed-width converters: Kafka's deserializers, big-endian.
    ("long", True, b"\x00" * 7 + b"\x07", 7),
    ("integer", True, b"\x00\x00\x00\x07", 7),
    ("integer", True, b"\x3f\xc0\x00\x00", 1069547520),
    ("short", True, b"42", 13362),
    ("short", True, b"\xff\xfe", -2),
    ("float", True, b"\x3f\xc0\x00\x00", 1.5),
    ("float", True, struct.pack(">f", 0.1), 0.10000000149011612),  # a Java float, widened to a double
    ("double", True, b"\x3f\xf8" + b"\x00" * 6, 1.5),
    ("boolean", True, b"\x01", True),
    ("boolean", True, b"\x00", False),
]


@pytest.mark.parametrize(("header_format", "schemas", "raw", "expected"), READ)
def test_each_header_converter_reads_a_header_as_kafka_connect_does(
    header_format: HeaderFormat, schemas: bool, raw: bytes, expected: Any
) -> None:
    value = header_reader(header_format, schemas)(raw)
    assert (type(value), value) == (type(expected), expected)


@pytest.mark.parametrize(
    "header_format", ["simple", "string", "json", "bytearray", "long", "integer", "short", "float", "double", "boolean"]
)
@pytest.mark.parametrize("schemas", [True, False])
def test_a_null_header_is_null_for_every_converter(header_format: HeaderFormat, schemas: bool) -> None:
    assert header_reader(header_format, schemas)(None) is None


def test_simple_is_simple_header_converters_reading() -> None:
    assert header_reader("simple", True) is header_value


REFUSED: list[tuple[HeaderFormat, bool, bytes, str]] = [
    ("json", True, b"42", 'exactly two fields, "schema" and "payload"'),  # JsonConverter's envelope required
    ("json", True, b"", 'exactly two fields, "schema" and "payload"'),
    ("json", False, b"mqtt-0", "not JSON"),
    ("json", False, b"{oops", "not JSON"),
    ("json", True, b'{"schema":{"type":"int32"},"payload":"x"}', "payload: expected int32, got a string"),
    ("long", True, b"42", "LongConverter reads exactly 8 byte(s), got 2"),
    ("integer", True, b"\x00" * 8, "IntegerConverter reads exactly 4 byte(s), got 8"),
    ("short", True, b"", "ShortConverter reads exactly 2 byte(s), got 0"),
    ("float", True, b"1.5", "FloatConverter reads exactly 4 byte(s), got 3"),
    ("double", True, b"\x00" * 4, "DoubleConverter reads exactly 8 byte(s), got 4"),
    ("boolean", True, b"\x02", "BooleanConverter reads 0 (false) or 1 (true), got 2"),  # BooleanDeserializer
    ("boolean", True, b"true", "BooleanConverter reads exactly 1 byte(s), got 4"),
]


@pytest.mark.parametrize(("header_format", "schemas", "raw", "reason"), REFUSED)
def test_a_header_its_converter_refuses_is_unconvertible_with_the_reason(
    header_format: HeaderFormat, schemas: bool, raw: bytes, reason: str
) -> None:
    with pytest.raises(Unconvertible, match=reason.replace("(", r"\(").replace(")", r"\)")):
        header_reader(header_format, schemas)(raw)


KCQL = "INSERT INTO i SELECT _header.n AS n, _header.raw AS raw, temperature FROM t"


def with_headers(headers: object, offset: int = 5) -> ConsumedRecord:
    return record("t", 0, offset, aggregate("d1", 0, temperature=21.5))._replace(headers=headers)


def test_the_router_reads_headers_with_the_sinks_header_converter() -> None:
    router = Router(parse(KCQL), read_header=header_reader("json", False))
    [item] = router.route([with_headers((("n", b"[1, 2]"), ("raw", b'{"a": "b"}')))]).items
    assert item.document == {"n": [1, 2], "raw": {"a": "b"}, "temperature": 21.5}
    bytes_router = Router(parse(KCQL), read_header=header_reader("bytearray", True))
    [item] = bytes_router.route([with_headers((("n", b"42"), ("raw", b"\xff")))]).items
    assert item.document == {"n": b"42", "raw": b"\xff", "temperature": 21.5}


def test_a_header_the_converter_refuses_fails_its_record_alone_naming_the_header() -> None:
    # Kafka Connect fails the record (a DataException in the HEADER_CONVERTER stage, errors.tolerance
    # decides); here it is unroutable, dead-lettered or stopping on as the error policy says.
    router = Router(parse(KCQL), read_header=header_reader("long", True))
    good = (("n", b"\x00" * 7 + b"\x01"), ("raw", None))
    routed = router.route([with_headers(good), with_headers((("n", b"\x01"), ("raw", None)), offset=6)])
    assert [item.document["n"] for item in routed.items] == [1]
    [unroutable] = routed.unroutable
    assert (unroutable.source.offset, type(unroutable.error).__name__) == (6, "FieldMissing")
    assert str(unroutable.error) == "header n: LongConverter reads exactly 8 byte(s), got 1"


def test_a_tombstones_headers_are_read_with_the_sinks_converter_too() -> None:
    router = Router(parse(KCQL), read_header=header_reader("string", True), tombstones=lambda _: True)
    tombstone = with_headers((("n", b"42"), ("raw", b"x")))._replace(record=None, value=b"")
    [item] = router.route([tombstone]).items
    assert (item.document["n"], item.document["raw"]) == ("42", "x")


def test_the_settings_default_to_simple_header_converter_and_take_the_others() -> None:
    default = SinkSettings(kcql=KCQL)
    assert (default.header_format, default.header_schemas_enable) == ("simple", True)
    json_headers = SinkSettings(kcql=KCQL, header_format="json", header_schemas_enable=False)
    assert (json_headers.header_format, json_headers.header_schemas_enable) == ("json", False)
    with pytest.raises(ValueError, match="header_format"):
        SinkSettings(kcql=KCQL, header_format="avro")  # type: ignore[arg-type]
