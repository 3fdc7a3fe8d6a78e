"""A gateway's records as Kafka Connect's converters write them, for consumers of a Connect
cluster that never had a registry: ``json`` (``org.apache.kafka.connect.json.JsonConverter``,
``fromConnectData``) and ``string`` (``org.apache.kafka.connect.storage.StringConverter``).

The record is the one the Avro path writes (``schemas/<name>.avsc``), seen as Kafka Connect
would hold it: the Avro schema becomes a Connect schema once (:func:`connect_schema`), a struct
whose fields have their Connect types (string, float64, int64, ...), ``optional`` for a union
with null, maps and arrays, and the logical types as Connect names them (Avro's
``timestamp-millis`` is ``{"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp",
"version": 1}``, its value epoch milliseconds). JsonConverter writes compact JSON, the schema's
keys in its order (type, fields/items/keys/values, optional, name, version, default, and a
struct field's ``field`` last); with ``schemas.enable`` (its default) each value is the
envelope ``{"schema": <Connect schema>, "payload": <value>}``, without it the bare value.

Left out of the Connect schema: the Avro ``doc`` strings (Confluent's AvroData would carry them;
they would be most of every record's bytes, and no JsonConverter consumer reads them) and an
enum's symbols (an enum is a Connect string, as it is for any consumer of the JSON).

A record that does not fit the schema raises :class:`SerializationError`: the gateway
dead-letters its input, as it does a record the Avro encoder refuses.

Record keys are text (the device id, KCQL WITHKEY's values, coap-message's resource URI), what
Stream-Reactor's MQTT source keys with WITHKEY: ``Schema.STRING_SCHEMA`` and the joined values
(``JsonSimpleConverter.convert``, kafka-connect-common
``io/lenses/streamreactor/connect/converters/source/JsonSimpleConverter.scala``; without WITHKEY it
keys by ``MsgKey``, a struct of the MQTT topic and message id, and its CoAP source by a struct of
source, resource and message id: ``CoapMessageConverter.keySchema``, kafka-connect-coap
``domain/CoapMessageConverter.scala``; our gateways key by the device or the resource instead, so a
topic's records of one device keep their order). ``OutputSettings.key_format`` writes that string
key as the config's ``key.converter`` does: StringConverter's UTF-8 text (the default, and
ByteArrayConverter's bytes), JsonConverter's JSON string (in the envelope
``{"schema":{"type":"string","optional":false},"payload":...}`` with ``key_schemas_enable``), or
AvroConverter's Avro ``"string"`` under ``<topic>-key`` (:func:`~fluxgate_core.serde.avro_string_key`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring
from typing import Any, Literal

from pydantic import Field

from fluxgate_core.errors import SerializationError
from fluxgate_core.serde import KeyEncode, RecordEncoder, StringKeys
from fluxgate_core.settings import Group

ValueFormat = Literal["avro", "json", "string"]
KeyFormat = Literal["string", "json", "avro"]

TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
_PRIMITIVES = {
    "string": "string",
    "boolean": "boolean",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "bytes": "bytes",
}
# Avro logical type -> (the Avro type it annotates, Connect's logical name); the value keeps its
# Avro form (epoch milliseconds, days since the epoch, milliseconds of the day), as Connect's JSON has it.
_LOGICAL = {"timestamp-millis": ("long", TIMESTAMP), "date": ("int", DATE), "time-millis": ("int", TIME)}
Schema = dict[str, Any]
Convert = Callable[[Any], Any]


class OutputSettings(Group):
    """How a gateway writes its record values: Avro through the registry (our pipeline's), or as a
    Kafka Connect converter does, for consumers of a Connect cluster with no registry."""

    value_format: ValueFormat = Field(
        "avro",
        description="avro (Confluent wire format, schema registered in the registry), json (Kafka Connect's "
        "JsonConverter; see value_schemas_enable) or string (its StringConverter: the record's JSON text); "
        "json and string need no registry and never contact it",
    )
    value_schemas_enable: bool = Field(
        True,
        description='json: each value is JsonConverter\'s envelope {"schema": ..., "payload": ...} '
        "(its schemas.enable); false: the bare JSON value",
    )
    key_format: KeyFormat = Field(
        "string",
        description="how the record key (text: the device id, KCQL WITHKEY's values, coap-message's resource URI) "
        "is written: string (Kafka Connect's StringConverter, the text in UTF-8; ByteArrayConverter reads the same "
        "bytes), json (its "
        "JsonConverter; see key_schemas_enable) or avro (Confluent wire format, the Avro string schema "
        "registered under <topic>-key in the registry)",
    )
    key_schemas_enable: bool = Field(
        True,
        description='json keys: each key is JsonConverter\'s envelope {"schema":{"type":"string","optional":false},'
        '"payload":"<key>"} (its schemas.enable); false: the bare JSON string "<key>"',
    )

    @property
    def uses_registry(self) -> bool:
        return self.value_format == "avro" or self.key_format == "avro"


def connect_schema(avro: Mapping[str, Any]) -> Schema:
    """The Connect schema of an Avro record schema, as JsonConverter writes it (``ValueError`` for
    an Avro type it has no mapping for: found when the gateway starts)."""
    return _schema(avro, optional=False)


def _schema(avro: Any, optional: bool, default: Any = None, has_default: bool = False) -> Schema:
    if isinstance(avro, list):  # a union: only [null, X] (either order) is a Connect type
        others = [branch for branch in avro if branch != "null"]
        if len(others) != 1 or len(avro) != 2:
            raise ValueError(f"union {avro} has no Connect type (only a union of null and one type has)")
        return _schema(others[0], True, default, has_default)
    if isinstance(avro, str):
        avro = {"type": avro}
    kind = avro.get("type")
    if isinstance(kind, dict | list):
        return _schema(kind, optional, default, has_default)
    schema: Schema
    logical = avro.get("logicalType")
    if logical is not None:
        if _LOGICAL.get(logical, ("",))[0] != kind:
            raise ValueError(f"logical type {logical} of {kind} has no Connect mapping here")
        schema = {"type": _PRIMITIVES[kind], "optional": optional, "name": _LOGICAL[logical][1], "version": 1}
    elif kind in _PRIMITIVES:
        schema = {"type": _PRIMITIVES[kind], "optional": optional}
    elif kind == "enum":
        schema = {"type": "string", "optional": optional}
    elif kind == "map":
        keys = {"type": "string", "optional": False}
        schema = {"type": "map", "keys": keys, "values": _schema(avro["values"], False), "optional": optional}
    elif kind == "array":
        schema = {"type": "array", "items": _schema(avro["items"], False), "optional": optional}
    elif kind == "record":
        fields = [
            {**_schema(f["type"], False, f.get("default"), "default" in f), "field": f["name"]} for f in avro["fields"]
        ]
        schema = {"type": "struct", "fields": fields, "optional": optional, "name": _full_name(avro)}
    else:
        raise ValueError(f"Avro type {kind!r} has no Connect mapping here")
    if has_default and default is not None:  # JsonConverter writes a default only when there is one
        schema["default"] = _payload_converter(schema)(_avro_default(schema, default))
    return schema


def _full_name(avro: Mapping[str, Any]) -> str:
    name = str(avro["name"])
    return name if "." in name or not avro.get("namespace") else f"{avro['namespace']}.{name}"


def _avro_default(schema: Schema, default: Any) -> Any:
    # Avro writes a bytes default as a string of code points 0-255.
    return default.encode("latin-1") if schema["type"] == "bytes" and isinstance(default, str) else default


def _payload_converter(schema: Schema) -> Convert:
    """What turns a record's value of ``schema`` into the JSON JsonConverter writes for it (``convertToJson``)."""
    kind, optional = schema["type"], schema["optional"]
    convert: Convert
    if kind == "struct":
        fields = [(f["field"], _payload_converter(f)) for f in schema["fields"]]

        def convert(value: Any) -> Any:
            try:
                return {name: field(value.get(name)) for name, field in fields}
            except AttributeError:
                raise SerializationError(f"expected a struct, got {type(value).__name__}") from None

    elif kind == "map":
        values = _payload_converter(schema["values"])

        def convert(value: Any) -> Any:
            return {_text(key): values(item) for key, item in value.items()}

    elif kind == "array":
        items = _payload_converter(schema["items"])

        def convert(value: Any) -> Any:
            return [items(item) for item in value]

    elif kind in ("float32", "float64"):
        convert = _float
    elif kind in CONNECT_INTEGER_RANGES:
        convert = _integer(*CONNECT_INTEGER_RANGES[kind])
    elif kind == "bytes":  # Jackson writes a binary node in base64
        convert = _base64
    elif kind == "boolean":
        convert = _boolean
    else:
        convert = _text

    def checked(value: Any) -> Any:
        if value is None:
            if optional:
                return None
            raise SerializationError(f"null for a required {kind} field")
        return convert(value)

    return checked


def _float(value: Any) -> float:
    if type(value) is bool or not isinstance(value, int | float):
        raise SerializationError(f"expected a number, got {type(value).__name__}")
    return float(value)  # a Connect float64 is written as a double: 20.0, never 20


# Connect's integer types are Java's Byte, Short, Integer and Long: a number outside its type's range
# would be read back wrapped (JsonConverter.java's toConnect takes intValue()/longValue() of the node),
# so it is refused: here as the Avro encoder refuses it, and by the sinks' reader
# (fluxgate_sink.connect_data) as a dead letter. Our Avro schemas map to int32 and int64 only; the
# reader meets all four in other writers' envelopes.
CONNECT_INTEGER_RANGES: Mapping[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _integer(low: int, high: int) -> Convert:
    def convert(value: Any) -> int:
        if type(value) is bool or not isinstance(value, int):
            raise SerializationError(f"expected an integer, got {type(value).__name__}")
        if not low <= value <= high:
            raise SerializationError(f"{value} is out of range for a Connect int{high.bit_length() + 1}")
        return value

    return convert


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise SerializationError(f"expected a boolean, got {type(value).__name__}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise SerializationError(f"expected a string, got {type(value).__name__}")
    return value


def _base64(value: Any) -> str:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise SerializationError(f"expected bytes, got {type(value).__name__}")
    return base64.b64encode(value).decode("ascii")


def _dumps(value: Any) -> bytes:
    """Compact JSON in UTF-8, as Jackson writes it (no spaces, non-ASCII as it is)."""
    # Where Jackson writes what no reader gets back, we refuse the record instead (it is dead-lettered):
    # a NaN or an infinity becomes the string "NaN" (Kafka's JsonSerializer.java keeps Jackson's
    # default WRITE_NAN_AS_STRINGS), which JsonConverter reads into a float64 as 0.0 (doubleValue() of
    # a text node); a lone surrogate becomes the escape \uD800, text that is no Unicode.
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as exc:  # a NaN or infinity, a lone surrogate (UnicodeEncodeError)
        raise SerializationError(f"record is not JSON Kafka Connect can write: {exc}") from exc


class ConnectJsonEncoder(StringKeys):
    """A record of one Avro schema as JsonConverter writes it (a :class:`~fluxgate_core.serde.RecordEncoder`):
    the ``{"schema", "payload"}`` envelope with ``schemas_enable``, else the bare payload."""

    def __init__(self, avro_schema: Mapping[str, Any], schemas_enable: bool = True) -> None:
        self.schema = connect_schema(avro_schema)
        self.schemas_enable = schemas_enable
        self._payload = _payload_converter(self.schema)
        self._head = b'{"schema":' + _dumps(self.schema) + b',"payload":'  # the same for every record

    def payload(self, record: Mapping[str, Any]) -> Any:
        """The record's value as JsonConverter's payload (parsed JSON)."""
        return self._payload(record)

    def encode(self, record: Mapping[str, Any]) -> bytes:
        body = _dumps(self._payload(record))
        return self._head + body + b"}" if self.schemas_enable else body


class ConnectStringEncoder(StringKeys):
    """A record as the value a StringConverter writes: a string. For a struct Kafka Connect would
    write ``Struct.toString()`` (``Struct{device_id=d1,...}``), a text no consumer parses; what users
    of Stream-Reactor's sources put under StringConverter, and what its sinks (and ours, with
    ``value_format`` string) read back, is a JSON document. So the string is the record's JSON text:
    the bytes of JsonConverter's bare payload (schemas.enable false), UTF-8."""

    def __init__(self, avro_schema: Mapping[str, Any]) -> None:
        self._json = ConnectJsonEncoder(avro_schema, schemas_enable=False)

    def encode(self, record: Mapping[str, Any]) -> bytes:
        return self._json.encode(record)


def connect_encoder(
    output: OutputSettings, avro_schema: Mapping[str, Any]
) -> ConnectJsonEncoder | ConnectStringEncoder:
    """The encoder of a format that needs no registry (``json``, ``string``)."""
    if output.value_format == "json":
        return ConnectJsonEncoder(avro_schema, output.value_schemas_enable)
    if output.value_format == "string":
        return ConnectStringEncoder(avro_schema)
    raise ValueError(f"value_format {output.value_format!r} is written through the registry")


KEY_SCHEMA = {"type": "string", "optional": False}  # Connect's Schema.STRING_SCHEMA, as JsonConverter writes it


def json_key_encoder(schemas_enable: bool = True) -> KeyEncode:
    """Keys as JsonConverter writes a Connect string key: in the envelope with ``schemas_enable``, else
    the bare JSON string. The envelope around the key is the same for every key: made once."""
    head = b'{"schema":' + _dumps(KEY_SCHEMA) + b',"payload":' if schemas_enable else b""
    tail = b"}" if schemas_enable else b""

    def encode(key: str) -> bytes:
        try:  # the escaping json.dumps does (ensure_ascii=False), without building an encoder per key
            return head + encode_basestring(key).encode() + tail
        except UnicodeEncodeError as exc:  # a lone surrogate: no JSON text holds it
            raise SerializationError(f"record key is not JSON Kafka Connect can write: {exc}") from exc

    return encode


class KeyedEncoder:
    """A value encoder writing its record keys with ``keys`` (another format than StringConverter's).
    Both are the bound functions themselves: no call added on the way to either."""

    __slots__ = ("encode", "encode_key")
    encode: Callable[[dict[str, Any]], bytes]
    encode_key: KeyEncode

    def __init__(self, values: RecordEncoder, keys: KeyEncode) -> None:
        self.encode = values.encode
        self.encode_key = keys
