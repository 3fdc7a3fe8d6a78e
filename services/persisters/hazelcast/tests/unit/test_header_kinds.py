"""A header read by another header converter than Kafka Connect's default (bytes from ByteArrayConverter,
JsonConverter's objects and lists, a FloatConverter's NaN) is stored as the same kind from a value field
is: bytes as base64, objects and lists as JSON, a NaN refused as having no JSON form."""

from __future__ import annotations

import json
import struct

import pytest
from fluxgate_testing.sink.memory import aggregate, record

from fluxgate_hazelcast_persister.values import json_bytes
from fluxgate_sink.errors import FieldMissing
from fluxgate_sink.formats import HeaderFormat, header_reader
from fluxgate_sink.kcql import parse
from fluxgate_sink.kcql_routing import Router

KCQL = "INSERT INTO q SELECT _header.h AS h, device_id FROM t STOREAS QUEUE"


def stored(header_format: HeaderFormat, raw: bytes, schemas: bool = False) -> bytes:
    router = Router(parse(KCQL), read_header=header_reader(header_format, schemas))
    source = record("t", 0, 1, aggregate("d1", 0))._replace(headers=(("h", raw),))
    [item] = router.route([source]).items
    return json_bytes(item.document)


@pytest.mark.parametrize(
    ("header_format", "raw", "schemas", "value_field"),
    [("bytearray", b"\x00\x01\xfb\xff", False, b"\x00\x01\xfb\xff"),
     ("json", b'{"a": [1, {"b": null}]}', False, {"a": [1, {"b": None}]}),
     ("json", b'{"schema":{"type":"bytes"},"payload":"AAH7/w=="}', True, b"\x00\x01\xfb\xff"),
     ("double", struct.pack(">d", 1.5), False, 1.5)],
)  # fmt: skip
def test_a_header_is_stored_as_the_same_kind_from_a_value_field(
    header_format: HeaderFormat, raw: bytes, schemas: bool, value_field: object
) -> None:
    assert stored(header_format, raw, schemas) == json_bytes({"h": value_field, "device_id": "d1"})


def test_a_bytearray_header_is_standard_base64_as_kafka_connects_json_writes_bytes() -> None:
    assert json.loads(stored("bytearray", b"\x00\x01\xfb\xff"))["h"] == "AAH7/w=="


def test_a_nan_float_header_has_no_json_form_as_a_nan_value_field() -> None:
    with pytest.raises(FieldMissing, match="h is NaN or infinite"):
        stored("float", b"\x7f\xc0\x00\x01")  # FloatConverter gives NaN (connect-runtime 4.4.0)
