"""How a topic's record values are written, and the decoder that reads them: the one place
where a record's bytes become the dict every sink writes; and how a record key is read where a
statement asks for it (``PK _key``: :func:`key_reader`, :class:`AvroKeys`, :func:`json_first`), and a
header where a SELECT names it (``_header.<name>``: :func:`header_reader`).

``avro`` (our pipeline's, and the default): Confluent wire format, schemas in the registry.
``json``: Kafka Connect's ``org.apache.kafka.connect.json.JsonConverter``, as it reads a record
(``toConnectData``): with ``schemas.enable`` (its default, true) each value is an envelope of
exactly two fields, ``schema`` and ``payload``, and the payload is read through the schema
(:mod:`fluxgate_sink.connect_data`); without, the value is the bare JSON, numbers integral or not as
written. ``string``: Kafka Connect's StringConverter, a UTF-8 text read as a JSON document, the bare
JSON, as Stream-Reactor's Elastic and (before 10.x) Cassandra sinks read a STRING value: with a
default Jackson mapper (lensesio/stream-reactor, kafka-connect-sql-common's
``io/lenses/json/sql/JacksonJson.scala``, ``asJson`` = ``readTree(String)``), from the Elastic sinks'
``JsonPayloadExtractor.scala`` (``handleString``) and ``ToJsonWithProjections.scala`` (the older
Cassandra sink's ``CassandraJsonWriter.scala``). A text that is not JSON fails the record there
("Invalid json"; the Elastic sinks index it as a JSON string, which Elasticsearch refuses), and is
dead-lettered here. Its Hazelcast sink never parses the text and stores it as a JSON string
(``writers/Writer.scala``: ``SimpleJsonConverter`` makes a STRING a ``TextNode``): the
hazelcast-persister stores that same string from the record's bytes (its ``values.text_json``), after
this reading has checked the text is JSON. Where Stream-Reactor differs and we do not follow
(docs/kafka-connect.md, JSON edge cases): its 10.x Cassandra sink, DataStax's connector
underneath, reads non-integral numbers exactly and keeps a text that is not a JSON object as
the raw string (datastax/kafka-sink ``MetadataCreator.java``, ``JsonData.java``).
Values become what the Avro decoder gives for the same data, so no sink needs code of its own for
JSON records.

The JSON text itself is read as Kafka Connect's JsonDeserializer (Jackson) reads it, where Python's
parser would read it otherwise (what follows the first value, leading zeros, whitespace only,
exact numeric Decimals): :mod:`fluxgate_sink.jackson`.

A value that does not decode raises :class:`SerializationError` (never retriable): the consumer
hands the record over undecoded and the runner dead-letters it with this reason, as it does an
Avro body that does not match its schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from decimal import Decimal
from functools import partial
from typing import Any, Literal

from fluxgate_core.consumed_record import Decoder
from fluxgate_core.errors import FluxgateError, SerializationError
from fluxgate_core.serde import AvroDecoder, registry_client
from fluxgate_core.settings import RegistrySettings
from fluxgate_sink import jackson
from fluxgate_sink.connect_data import DECIMAL, convert, json_kind
from fluxgate_sink.header_values import FIXED_WIDTH, ReadHeader, Unconvertible, fixed_width, header_value

RecordFormat = Literal["avro", "json", "string"]
KeyFormat = Literal["string", "json", "avro"]
StringKeys = Literal["text", "json"]  # how PK _key takes a key read as a string: see json_first
#: Kafka Connect's header converters (header_reader): SimpleHeaderConverter (its default), StringConverter,
#: JsonConverter, ByteArrayConverter and connect-runtime's fixed-width ones (header_values.FIXED_WIDTH).
HeaderFormat = Literal[
    "simple", "string", "json", "bytearray", "long", "integer", "short", "float", "double", "boolean"
]
KEY_FIELD = "_key"  # KCQL's name for the record key (Stream-Reactor's ``PK _key``)
ENVELOPE_REQUIRED = (
    'schemas.enable is true, so each value must be a JSON object of exactly two fields, "schema" and '
    '"payload" (Kafka Connect\'s envelope); for plain JSON set schemas.enable to false'
)
_WIRE_HEADER = 5  # the magic byte and the 4-byte schema id
_DECIMAL_BYTES = DECIMAL.encode()


def value_decoder(
    value_format: RecordFormat, schemas_enable: bool, registry: RegistrySettings, *, whole_text: bool = False
) -> Decoder:
    """The decoder of a sink's record values: Avro through the registry, or Kafka Connect's JSON.
    ``whole_text``: the sink stores StringConverter text as it is (:class:`WholeTextDecoder`)."""
    if value_format == "json":
        return ConnectJsonDecoder(schemas_enable)
    if value_format == "string":
        return WholeTextDecoder() if whole_text else ConnectJsonDecoder(schemas_enable=False, text=True)
    return AvroDecoder(registry_client(registry))


def key_reader(key_format: KeyFormat, schemas_enable: bool) -> Callable[[bytes | None], Any]:
    """How a record key is read where a statement asks for it (``PK _key``): as Kafka Connect's
    StringConverter reads it (UTF-8 text, the default, what our gateways write) or its JsonConverter.
    Avro keys need the registry: :class:`AvroKeys`."""
    if key_format == "json":
        return ConnectJsonDecoder(schemas_enable).read
    if key_format == "avro":
        raise ValueError("Avro keys are read through the registry: AvroKeys.of(registry).read")
    return _string_key


def header_reader(header_format: HeaderFormat, schemas_enable: bool) -> ReadHeader:
    """How a header a SELECT names is read: as the worker's ``header.converter`` reads it in
    ``toConnectHeader`` (connect-api/-json/-runtime 4.4.0, run on sample headers). Each gives None
    for a null header. SimpleHeaderConverter types its UTF-8 text (:func:`header_value`); StringConverter
    keeps the text, as it reads a key; JsonConverter reads the JSON as it reads a key or a value, with
    its own ``schemas.enable`` (``header.converter.schemas.enable``, true by default: the envelope);
    ByteArrayConverter keeps the bytes; LongConverter ... BooleanConverter read their fixed width.
    A header the converter refuses raises :class:`~fluxgate_sink.header_values.Unconvertible`."""
    if header_format == "json":
        return partial(_json_header, ConnectJsonDecoder(schemas_enable), schemas_enable)
    if header_format == "string":
        return _string_key
    if header_format == "bytearray":
        return _bytes_header
    if header_format in FIXED_WIDTH:
        return fixed_width(header_format)
    return header_value


def _json_header(decoder: ConnectJsonDecoder, schemas_enable: bool, raw: bytes | None) -> Any:
    try:
        return decoder.read(raw)
    except SerializationError as exc:  # JsonConverter's DataException, for this header alone
        setting = f"sink.header_schemas_enable={str(schemas_enable).lower()}"
        raise Unconvertible(f"JsonConverter ({setting}): {exc}") from None


def _bytes_header(raw: bytes | None) -> bytes | None:
    return raw  # ByteArrayConverter.toConnectHeader: the bytes as they are (a null header null)


class AvroKeys:
    """Record keys as Confluent's AvroConverter writes them (the wire format, the schema registered under
    ``<topic>-key``), read by the values' decoder (:class:`~fluxgate_core.serde.AvroDecoder`): a
    primitive key (a string, an int, a long) as its value, a record key as a dict, a null key as None.

    Keys are read while routing, on the event loop: :meth:`fetch_schemas` fetches the schemas of keys
    not seen yet beforehand, on a thread, so routing never waits for the registry and a registry that
    is away is waited for (its RegistryError, retriable) instead of failing the record."""

    def __init__(self, decoder: AvroDecoder) -> None:
        self._decoder = decoder
        self._known: set[bytes] = set()  # the wire-format headers (magic byte and schema id) read once

    @classmethod
    def of(cls, registry: RegistrySettings) -> AvroKeys:
        return cls(AvroDecoder(registry_client(registry)))

    def read(self, key: bytes | None) -> Any:
        return None if key is None else self._decoder.read(key)

    def fetch_schemas(self, keys: Iterable[bytes | None]) -> None:
        """Fetch the schema of each key whose schema id was not read yet; raises a retriable error
        (the registry is away) and nothing else: a key that cannot decode fails when it is read."""
        for key in keys:
            if not key or len(key) < _WIRE_HEADER or (header := key[:_WIRE_HEADER]) in self._known:
                continue
            try:
                self._decoder.read(key)
            except FluxgateError as exc:
                if exc.retriable:
                    raise
                # An unknown id is not remembered as read: the decoder believes the registry's
                # 404 for a while only, so a key read on the loop after that would ask it again.
                continue
            self._known.add(header)


def _string_key(key: bytes | None) -> str | None:
    # StringConverter decodes with Java's new String(bytes, UTF_8): a malformed sequence becomes U+FFFD.
    return None if key is None else key.decode("utf-8", "replace")


def json_first(key: Any) -> Any:
    """A key that reads as a string, parsed as JSON first, as Stream-Reactor's Elastic sink takes the
    record key for ``PK _key`` (lensesio/stream-reactor, kafka-connect-elastic7's
    ``io/lenses/streamreactor/connect/elastic7/JsonPayloadExtractor.scala``: ``handleString`` for a
    STRING key schema, ``handleSchemaLess`` for a schemaless String, both ``tryParseJson`` first and
    a ``TextNode`` of the text when that fails). So StringConverter's ``1.50``, JsonConverter's
    ``"1.50"`` (envelope or bare) and an Avro string ``1.50`` are all the number 1.5, ``{"a": 1}`` a
    record key, ``sensor-7`` or ``007`` (Jackson refuses leading zeros, as Python's json does) the
    text. NaN and Infinity are not JSON to Jackson's default parser either: they stay text. Any key
    that is not a string (a number, a record) is as it was read. Our own services keep the text
    (``sink.string_keys=text``): a device id ``007`` or ``1.50`` is an id, not a number."""
    if not isinstance(key, str):
        return key
    try:
        return json.loads(key, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # not JSON (or too deep to read): the text, as TextNode.valueOf(s)
        return key


class ConnectJsonDecoder:
    """Record values as Kafka Connect's JsonConverter reads them; a sink needs an object (a struct
    or a map), so any other value, a tombstone included, does not decode."""

    def __init__(self, schemas_enable: bool = True, *, text: bool = False) -> None:
        self.schemas_enable = schemas_enable
        self.text = text  # StringConverter's: UTF-8 text first, a malformed sequence as U+FFFD

    def decode(self, data: bytes) -> dict[str, Any]:
        # The consumer hands a tombstone over as b"": no value, whatever schemas.enable says.
        value = self.read(data) if data else None
        if not isinstance(value, dict):
            raise SerializationError(
                f"the value is {json_kind(value)}, not an object: a sink writes records with fields"
            )
        return value

    def read(self, data: bytes | None) -> Any:
        """The value as Kafka Connect holds it (None for a null value or key, a tombstone)."""
        if data is None:
            return None
        # Decimals exact only where a schema may ask for one: JsonConverter reads a numeric Decimal
        # as BigDecimal (JsonConverter.java, the Decimal LogicalTypeConverter's toConnect).
        exact = self.schemas_enable and _DECIMAL_BYTES in data
        parsed = self._parse(data, exact)
        if not self.schemas_enable:
            # JsonConverter.convertToConnect: no content (MissingNode) is a null without schemas.
            return None if parsed is jackson.MISSING else parsed
        if not isinstance(parsed, dict) or parsed.keys() != {"schema", "payload"}:
            found = f"an object of {sorted(parsed)}" if isinstance(parsed, dict) else json_kind(parsed)
            raise SerializationError(f"{ENVELOPE_REQUIRED}; got {found}")
        try:
            return _payload(parsed["schema"], parsed["payload"], exact)
        except RecursionError:
            raise SerializationError("payload: nested too deep to read through its schema") from None

    def _parse(self, data: bytes, exact: bool) -> Any:
        if self.text:
            # StringConverter's text, parsed by the sink as a default Jackson mapper parses a String
            # (Stream-Reactor's JacksonJson.scala, asJson: readTree(String), no feature changed): what
            # follows the first value ignored, no leading zeros, no NaN, the last duplicate key kept,
            # non-integral numbers as doubles; a BOM, U+FEFF in the text, is not JSON there either
            # (Jackson reads a BOM from bytes only: FasterXML/jackson-core#458).
            return jackson.loads(data.decode("utf-8", "replace"), leading_zeros=False)
        # JsonDeserializer.java: readTree on the bytes, ALLOW_LEADING_ZEROS_FOR_NUMBERS on.
        return jackson.loads(data, leading_zeros=True, exact_decimals=exact)


class WholeTextDecoder(ConnectJsonDecoder):
    """StringConverter values of a sink that stores the text itself, never what it parses to:
    Stream-Reactor's Hazelcast sink (writers/Writer.scala: ``toJson(record).toString``, a STRING
    value a Jackson TextNode) stores any text, JSON or not. A JSON object's fields still route the
    record (a PK); any other text has none, so a statement that needs one finds it missing. Only a
    null value (a tombstone) has no text to store."""

    def __init__(self) -> None:
        super().__init__(schemas_enable=False, text=True)

    def decode(self, data: bytes) -> dict[str, Any]:
        if not data:
            raise SerializationError(f"the value is {json_kind(None)}: there is no text to store")
        try:
            value = self.read(data)
        except SerializationError:  # not JSON: stored as it is all the same
            return {}
        return value if isinstance(value, dict) else {}


def _payload(schema: Any, payload: Any, exact: bool) -> Any:
    if schema is None:  # an envelope without a schema: the payload as it is
        return _floats(payload) if exact else payload
    if not isinstance(schema, dict):
        raise SerializationError(f'the envelope\'s "schema" is {json_kind(schema)}, not an object')
    return convert(schema, payload, "payload")


def _floats(node: Any) -> Any:
    """``node`` with its Decimals as floats: a payload without a schema, read as JsonConverter reads
    a non-integral number without one (``doubleValue``)."""
    if type(node) is Decimal:
        return float(node)
    if type(node) is dict:
        return {key: _floats(item) for key, item in node.items()}
    if type(node) is list:
        return [_floats(item) for item in node]
    return node


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
