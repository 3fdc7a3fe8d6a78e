"""Avro in the Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro body.

The registry is reached through confluent-kafka's ``SchemaRegistryClient``; encoding and
decoding are fastavro's schemaless writer and reader, behind a writer and a reader compiled
from the schemas (``avro_fast``, ``avro_read``) that hand fastavro whatever they do not cover.
The writer registers its schema once, at start, under the topic-name strategy subject
``<topic>-value`` so that a registry that is down or a schema change that breaks
compatibility stops the service before it consumes anything.
"""

from __future__ import annotations

import io
import json
import struct
import time
from collections.abc import Callable
from typing import Any, Protocol

import fastavro
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from fluxgate_core.avro_fast import Unexpected, compile_record, zigzag
from fluxgate_core.avro_read import Reader, Refused, compile_reader
from fluxgate_core.errors import RegistryError, SerializationError
from fluxgate_core.settings import RegistrySettings

MAGIC = 0
_HEADER = struct.Struct(">bI")
STRING_SCHEMA = '"string"'  # the Avro schema of a record key that is text
KeyEncode = Callable[[str], bytes]  # a record key's text as the bytes written to Kafka


def value_subject(topic: str) -> str:
    """Topic-name strategy subject for a record value."""
    return f"{topic}-value"


def key_subject(topic: str) -> str:
    """Topic-name strategy subject for a record key."""
    return f"{topic}-key"


def registry_client(settings: RegistrySettings) -> SchemaRegistryClient:
    return SchemaRegistryClient(settings.client_config())


def register(client: SchemaRegistryClient, subject: str, schema_text: str, compatibility: str | None) -> int:
    """Set the subject's compatibility (when given) and register the schema; return its id."""
    try:
        if compatibility:
            _set_compatibility(client, subject, compatibility)
        return int(client.register_schema(subject, Schema(schema_text, "AVRO")))
    except SchemaRegistryError as exc:
        raise RegistryError(f"registry refused schema for subject {subject!r}: {exc}") from exc
    except Exception as exc:  # connection errors come from requests/httpx underneath
        raise RegistryError(f"schema registry unreachable while registering {subject!r}: {exc}") from exc


def _set_compatibility(client: SchemaRegistryClient, subject: str, level: str) -> None:
    try:
        client.set_compatibility(subject_name=subject, level=level)
    except SchemaRegistryError as exc:
        if exc.http_status_code != 409:
            raise
        # Every service sets this at start. On a new subject Apicurio creates the rule, and
        # answers all but the first of simultaneous creators 409 "rule already exists".
        # The rule exists now, so setting it again is an update, which cannot conflict.
        client.set_compatibility(subject_name=subject, level=level)


class RecordEncoder(Protocol):
    """What a gateway writes a record's value with: :class:`AvroEncoder` (the wire format, the
    schema in the registry), or one of Kafka Connect's converters
    (:mod:`fluxgate_core.json_records`). Raises :class:`SerializationError` for a record that does
    not fit its schema (the input is dead-lettered). ``encode_key`` writes the record's key (its
    text: the device id, or KCQL WITHKEY's values): :class:`StringKeys` unless the gateway's
    output names another key format (:class:`~fluxgate_core.json_records.KeyedEncoder`)."""

    def encode(self, record: dict[str, Any]) -> bytes: ...

    def encode_key(self, key: str) -> bytes: ...


class StringKeys:
    """Record keys as Kafka Connect's StringConverter writes them, the text in UTF-8 (a ByteArrayConverter
    consumer reads the same bytes): what every value encoder writes its keys as by default."""

    @staticmethod
    def encode_key(key: str) -> bytes:
        return key.encode()


def avro_string_key(client: SchemaRegistryClient, topic: str, compatibility: str | None) -> KeyEncode:
    """Keys of ``topic`` as Confluent's AvroConverter writes a Connect string key: the Avro ``"string"``
    registered under ``<topic>-key``, each key in the wire format."""
    header = _HEADER.pack(MAGIC, register(client, key_subject(topic), STRING_SCHEMA, compatibility))

    def encode(key: str) -> bytes:
        body = key.encode()
        return header + zigzag(len(body)) + body  # an Avro string: its length (a long), then its UTF-8

    return encode


class AvroEncoder(StringKeys):
    """Encodes dicts of one record type for one topic."""

    def __init__(self, schema: dict[str, Any], schema_id: int) -> None:
        self._parsed = fastavro.parse_schema(schema)
        self._name = str(schema.get("name", "record"))
        self._header = _HEADER.pack(MAGIC, schema_id)
        self.schema_id = schema_id
        self._buffer = io.BytesIO()  # reused: encode() is not re-entrant, and nothing awaits inside it
        self._compiled = compile_record(self._parsed)

    @classmethod
    def registered(
        cls,
        client: SchemaRegistryClient,
        topic: str,
        schema_text: str,
        schema: dict[str, Any],
        compatibility: str | None = "BACKWARD",
    ) -> AvroEncoder:
        return cls(schema, register(client, value_subject(topic), schema_text, compatibility))

    def encode(self, record: dict[str, Any]) -> bytes:
        if self._compiled is not None:
            try:
                return self._header + self._compiled(record)
            except Unexpected:
                pass  # fastavro encodes it, or says precisely what does not fit
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        buffer.write(self._header)
        try:
            fastavro.schemaless_writer(buffer, self._parsed, record)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SerializationError(f"record does not fit schema {self._name}: {exc}") from exc
        return buffer.getvalue()


class AvroDecoder:
    """Decodes wire-format bytes written with any schema id the registry knows.

    Writer schemas are fetched once per id and cached; an optional reader schema
    applies Avro schema resolution so a consumer sees the fields it expects. Each id
    gets a reader compiled for its (writer, reader) pair, found by the message's
    five header bytes; a record it does not decode as fastavro would goes to fastavro.
    An id the registry does not know is believed unknown for ``unknown_for_s`` seconds:
    records carrying a bogus id (a broken or hostile producer) cost one registry request
    in that time, not one each, while an id registered since is found after it.
    """

    def __init__(
        self,
        client: SchemaRegistryClient,
        reader_schema: dict[str, Any] | None = None,
        *,
        unknown_for_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._reader = fastavro.parse_schema(reader_schema) if reader_schema else None
        self._writers: dict[int, Any] = {}
        self._compiled: dict[bytes, Reader | None] = {}
        self._unknown: dict[int, tuple[float, str]] = {}  # id -> (when the registry said 404, what it said)
        self._unknown_for_s = unknown_for_s
        self._clock = clock

    def decode(self, data: bytes) -> dict[str, Any]:
        header = data[: _HEADER.size]
        try:
            compiled = self._compiled[header]  # one lookup per record: this is every consumer's hot path
        except KeyError:  # a schema id's first record is the compiled reader's too
            self._writer_schema(wire_schema_id(data))
            compiled = self._compiled.get(header)
        if compiled is not None:
            try:
                return compiled(data, _HEADER.size)
            except Refused as exc:  # never handed to fastavro, which would loop through it
                raise SerializationError(f"Avro body refused (schema id {wire_schema_id(data)}): {exc}") from exc
            except Exception:  # noqa: S110 - fastavro decodes it, or says precisely why not
                pass
        record = self.read(data)
        if not isinstance(record, dict):
            raise SerializationError(f"schema id {wire_schema_id(data)} is not a record schema")
        return record

    def read(self, data: bytes) -> Any:
        """Any datum, not only a record: a primitive as its value (a record key written by Confluent's
        AvroConverter: an Avro string, int or long), a record as a dict; errors as :meth:`decode`'s."""
        schema_id = wire_schema_id(data)
        writer = self._writer_schema(schema_id)
        try:
            return fastavro.schemaless_reader(io.BytesIO(data[_HEADER.size :]), writer, self._reader)
        except Exception as exc:  # fastavro raises plain EOFError/ValueError/... on bad bodies
            raise SerializationError(f"Avro body does not match schema id {schema_id}: {exc}") from exc

    def _writer_schema(self, schema_id: int) -> Any:
        writer = self._writers.get(schema_id)
        if writer is None:
            self._check_not_known_unknown(schema_id)
            try:
                registered = self._client.get_schema(schema_id)
            except SchemaRegistryError as exc:
                if exc.http_status_code == 404:
                    self._unknown[schema_id] = (self._clock(), str(exc))
                    raise SerializationError(f"unknown schema id {schema_id}: {exc}") from exc
                raise RegistryError(f"registry failed fetching schema id {schema_id}: {exc}") from exc
            except Exception as exc:
                raise RegistryError(f"schema registry unreachable fetching id {schema_id}: {exc}") from exc
            writer = fastavro.parse_schema(json.loads(registered.schema_str or "null"))
            self._writers[schema_id] = writer
            self._compiled[_HEADER.pack(MAGIC, schema_id)] = compile_reader(writer, self._reader)
        return writer

    def _check_not_known_unknown(self, schema_id: int) -> None:
        if (said := self._unknown.get(schema_id)) is None:
            return
        when, reply = said
        if self._clock() - when < self._unknown_for_s:
            raise SerializationError(f"unknown schema id {schema_id}: {reply} (the registry's answer, kept a while)")
        del self._unknown[schema_id]


def wire_body(data: bytes) -> bytes:
    """The Avro body of a wire-format message, the registry's header (magic byte, schema id) cut
    off; :class:`SerializationError` if it has none."""
    wire_schema_id(data)
    return data[_HEADER.size :]


def wire_schema_id(data: bytes) -> int:
    """The schema id in a wire-format message; :class:`SerializationError` if it has none."""
    if len(data) < _HEADER.size:
        raise SerializationError(f"message of {len(data)} bytes is too short for the wire format")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SerializationError(f"unknown magic byte {magic}: not Confluent wire format")
    return int(schema_id)
