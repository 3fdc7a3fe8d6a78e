"""The value each item becomes in Hazelcast.

* ``WITHFORMAT JSON`` (the default): the projected document as a ``HazelcastJsonValue``,
  datetimes as ISO-8601 strings (``2026-11-23T12:00:00+00:00``; Avro's timestamps decode
  in UTC, and a naive one is taken as UTC), bytes as standard base64 with padding, the way
  Kafka Connect's JsonConverter (Jackson) writes a BYTES field: a reader moving from
  Stream-Reactor decodes a ``CoapMessage``'s ``payload`` as it did. Hazelcast keeps it
  as JSON, so an IMap of them can be queried with predicates and SQL on its fields.
  The value handed to the client is already serialized (:func:`json_data`): the client's own
  path costs about 2 µs a value (an 8 KB buffer per value, the string encoded again).
* ``WITHFORMAT AVRO``: the consumed record's bytes, unchanged, as a ``byte[]``: Confluent wire format,
  magic byte 0 and the registry's schema id of ``<topic>-value``, so a reader decodes
  them with the same registry (and the writer's schema, however the topic's schema
  evolved). Only with ``SELECT *``: re-encoding a projection would need a schema of its
  own per target; ``structures.check_statements`` refuses that at start. Under
  ``sink.semantics=stream-reactor``, the Avro body alone, without the registry's header, as
  Stream-Reactor's Hazelcast sink stores it (``writers/Writer.scala``: ``convert`` for AVRO is
  ``serializeAvro(toAvro(record))``, plain Avro binary of the record as Confluent's AvroData
  turns the Connect record back into Avro: for ``SELECT *`` the writer's schema, so the same
  body), a ``byte[]`` for a Java reader as there.
* StringConverter values (``sink.value_format=string``): the consumed text itself, stored as
  Stream-Reactor's Hazelcast sink stores it, one JSON string (:func:`text_json`), whatever the
  statement projects; in the same ``HazelcastJsonValue`` as every other JSON value here.
* Under ``sink.semantics=stream-reactor`` (a connector config, through ``fluxgate connect``) each
  JSON value is a ``java.lang.String`` of the same text, not a ``HazelcastJsonValue``, as
  Stream-Reactor's Hazelcast sink stores it (``writers/Writer.scala``: ``convert`` is
  ``toJson(record).toString`` for WITHFORMAT JSON and TEXT): a Java reader that casts a value to
  ``String`` keeps working. Both are serialized alike, a UTF-8 string after the type id
  (the client's ``StringSerializer`` and ``HazelcastJsonValueSerializer``); only the id differs.

What this module and ``sink.py`` take from the client beyond its public API, for the
per-value cost: the ringbuffer add_all codec (``hazelcast.protocol.codec``, the client's
internals) and the protocol's frame layout, to frame a ringbuffer's JSON values at once
(:func:`add_all_json_request`); the serialized form of a ``HazelcastJsonValue``, built as a
``Data`` the client hands on as it is (:func:`json_data`); and the proxy's private
``_invoke``, through which ``sink.py`` sends that request, as ``Ringbuffer.add_all`` does
itself. ``tests/unit/test_borrowed_hazelcast.py`` pins each of them against the installed
client, so an upgrade that changes one fails a test by name.
"""

from __future__ import annotations

import math
import struct
from base64 import b64encode
from collections.abc import Sequence
from decimal import Decimal
from itertools import chain
from typing import Any

import orjson
from hazelcast.protocol.client_message import BEGIN_FRAME_BUF, END_FINAL_FRAME_BUF, OutboundMessage
from hazelcast.protocol.codec import ringbuffer_add_all_codec as add_all_codec
from hazelcast.serialization.data import Data
from hazelcast.serialization.serialization_const import CONSTANT_TYPE_STRING, JAVASCRIPT_JSON_SERIALIZATION_TYPE

from fluxgate_core.serde import wire_body
from fluxgate_sink.errors import FieldMissing
from fluxgate_sink.sink import SinkItem

Value = Data | bytes | bytearray
# What the client writes before a HazelcastJsonValue's string: partition hash 0 (no
# partitioning strategy: the sink configures none), then the JSON serializer's type id; before a
# str (a java.lang.String to a Java reader), the string serializer's.
_JSON_HEADER = struct.pack(">ii", 0, JAVASCRIPT_JSON_SERIALIZATION_TYPE)
_STRING_HEADER = struct.pack(">ii", 0, CONSTANT_TYPE_STRING)
_OPTION = orjson.OPT_NAIVE_UTC
_FRAME_HEADER = 6  # a frame's length (int) and flags (short) before its bytes
_NO_FLAGS = b"\x00\x00"


class _Prefixes(dict[int, bytes]):
    """The frame prefix of a JSON value of each size (its length, no flags, the header, the
    JSON's length); a lookup of a size seen before stays in C. Values of a topic have few sizes."""

    def __init__(self, header: bytes) -> None:
        super().__init__()
        self._header = header

    def __missing__(self, size: int) -> bytes:
        if len(self) >= 4096:
            self.clear()
        frame = _FRAME_HEADER + len(self._header) + 4 + size
        prefix = frame.to_bytes(4, "little") + _NO_FLAGS + self._header + size.to_bytes(4, "big")
        self[size] = prefix
        return prefix


_PREFIXES = {False: _Prefixes(_JSON_HEADER), True: _Prefixes(_STRING_HEADER)}  # by as_string


def value_of(item: SinkItem, as_string: bool = False) -> Value:
    """What ``item`` is stored as, by its statement's format; ``as_string``: in Stream-Reactor's
    forms (see the module), a JSON value as a String and an Avro one as its plain body."""
    if item.statement.format == "AVRO":
        # A bytearray: the client stores it as a byte[] (BYTE_ARRAY), which any client reads; it
        # pickles bytes (PYTHON_TYPE_PICKLE), which only Python reads, and not at all unless UTF-8.
        return bytearray(wire_body(item.source.value) if as_string else item.source.value)
    return json_data(json_bytes(item.document), as_string)


def json_data(encoded: bytes, as_string: bool = False) -> Data:
    """UTF-8 JSON as the client serializes a ``HazelcastJsonValue`` of it (the header, the
    length as a big-endian int, the bytes: the client's default byte order, which the sink
    keeps), so a reader gets a ``HazelcastJsonValue`` as before; ``as_string``: a ``str`` of it,
    which a Java reader gets as a ``java.lang.String``. A unit test holds both to the client's
    own serialization."""
    header = _STRING_HEADER if as_string else _JSON_HEADER
    data: Data = Data(header + len(encoded).to_bytes(4, "big") + encoded)  # type: ignore[no-untyped-call]
    return data


def add_all_json_request(
    name: str, documents: Sequence[bytes], overflow_policy: int, as_string: bool = False
) -> OutboundMessage:
    """The request ``Ringbuffer.add_all([json_data(d, as_string) for d in documents], overflow_policy)``
    sends, byte for byte (a unit test holds it to the client's codec), made from each
    document's UTF-8 JSON. The client checks, converts and frames each value in Python calls
    of its own; here each value's frame is its prefix (a little-endian frame length, no flags,
    the JSON value's header, the JSON's big-endian length), which depends only on the JSON's
    size and is made once per size, then the JSON, all joined at once, with no Python call
    per value: 0.10 µs a value against the client's 0.40 plus ``json_data``'s 0.25."""
    # The client's own request of no values (the header, the name, an empty list), with the
    # frames put inside the list: the codec's encode_request only, none of its private names.
    request: OutboundMessage = add_all_codec.encode_request(name, [], overflow_policy)  # type: ignore[no-untyped-call]
    end = len(request.buf) - len(END_FINAL_FRAME_BUF)
    if bytes(request.buf[end - len(BEGIN_FRAME_BUF) :]) != BEGIN_FRAME_BUF + END_FINAL_FRAME_BUF:
        # Another client version frames it otherwise: its own way then, slower, still right.
        values = [json_data(document, as_string) for document in documents]
        slow: OutboundMessage = add_all_codec.encode_request(name, values, overflow_policy)  # type: ignore[no-untyped-call]
        return slow
    prefixes = map(_PREFIXES[as_string].__getitem__, map(len, documents))
    request.buf[end:end] = b"".join(chain.from_iterable(zip(prefixes, documents, strict=True)))
    return request  # as the codec's: not retryable, holds data


# Jackson's escapes in a JSON string (CharTypes' output escapes: the quote, the backslash, the five
# short forms, any other character below 0x20 as \u00XX with upper-case hex digits); nothing else.
_JACKSON_ESCAPES = {code: f"\\u{code:04X}" for code in range(0x20)} | {
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    ord("\b"): "\\b",
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\f"): "\\f",
    ord("\r"): "\\r",
}


def text_json(raw: bytes) -> bytes:
    """A StringConverter value as Stream-Reactor's Hazelcast sink stores it: the whole text, one JSON
    string, never parsed. lensesio/stream-reactor, kafka-connect-hazelcast ``writers/Writer.scala``:
    ``convert`` is ``toJson(record).toString`` for WITHFORMAT JSON and TEXT; ``toJson`` projects with
    kafka-connect-common's ``schemas/ConverterUtil.scala`` (``convert``), which hands a value that is
    not a Struct back unchanged (its ConnectException is made, never thrown), so SELECT, AS and IGNORE
    leave the text whole; then ``convertValueToJson``: ``json/SimpleJsonConverter.scala`` makes a
    STRING a Jackson ``TextNode``, whose ``toString`` is the quoted, escaped text. The text is UTF-8
    decoded as StringConverter decodes it (Java's ``new String(bytes, UTF_8)``: a malformed sequence
    is U+FFFD), so ``{"a":1}`` is stored as ``"{\\"a\\":1}"``."""
    text = raw.decode("utf-8", "replace").translate(_JACKSON_ESCAPES)
    return f'"{text}"'.encode()


def to_json(document: dict[str, Any]) -> str:
    """:func:`json_bytes` as a string."""
    return json_bytes(document).decode()


def json_bytes(document: dict[str, Any]) -> bytes:
    """Compact JSON; datetimes as ISO-8601, decimals as strings, bytes as base64 (see the module).

    orjson, not the standard library: with datetimes in every aggregate, ``json.dumps``
    called back into Python for each one and the encoding cost more per record than the
    Avro decode (about 20 µs against 2). NaN and infinities (valid Avro doubles) have no
    JSON form, and orjson would write them as null: such a document is refused for good
    (:class:`FieldMissing`, not retriable), so the error policy decides. Only a document
    whose JSON holds a null can hold one, so only those are searched: walking every
    document in Python cost more than encoding it."""
    try:
        encoded = orjson.dumps(document, default=_plain, option=_OPTION)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise FieldMissing(f"the document has no JSON form: {exc}") from exc
    if b"null" in encoded:
        bad = _non_finite(document)
        if bad is not None:
            raise FieldMissing(f"the document has no JSON form: {bad} is NaN or infinite")
    return encoded


def json_documents(documents: Sequence[dict[str, Any]]) -> list[bytes]:
    """:func:`json_bytes` of every document, encoded at once (no Python call of ours per document:
    0.3 µs less each). Raises :class:`FieldMissing` when any has no JSON form; which one, the caller
    finds by encoding them one by one."""
    try:
        encoded = [orjson.dumps(document, default=_plain, option=_OPTION) for document in documents]
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise FieldMissing(f"a document has no JSON form: {exc}") from exc
    if b"null" in b"".join(encoded):  # JSON holds no "null" across two documents' edges: '}' '{'
        for document, json in zip(documents, encoded, strict=True):
            if b"null" in json and _non_finite(document) is not None:
                raise FieldMissing("a document has no JSON form: a value is NaN or infinite")
    return encoded


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _non_finite(value: Any, path: str = "") -> str | None:
    """The path of the first NaN or infinity in ``value``, else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path or "the value"
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, float | dict | list):
                found = _non_finite(item, f"{path}.{key}" if path else str(key))
                if found is not None:
                    return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _non_finite(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None
