"""The options every persister shares, one group reused by all (``<PREFIX>SINK__*``).

Names and defaults follow Stream-Reactor's (``error.policy`` THROW, ``max.retries`` 20,
``retry.interval`` 60 s) so its users find what they know. A persister subclasses
:class:`SinkSettings` to give ``kcql`` its own default (es-persister, also its choice of ids:
:meth:`SinkSettings.document_ids`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from fluxgate_core.settings import Group
from fluxgate_sink.errors import KcqlError
from fluxgate_sink.formats import HeaderFormat, KeyFormat, RecordFormat, StringKeys
from fluxgate_sink.smt import TransformConfigError
from fluxgate_sink.transforms import TransformConfig, chain

if TYPE_CHECKING:
    from fluxgate_sink.ids import MakeId

ErrorPolicy = Literal["NOOP", "THROW", "RETRY"]


class SinkSettings(Group):
    """Routing, batching, error policy and dead letters of one persister."""

    kcql: str = Field(..., min_length=1, description="KCQL statements, separated by ';'")
    error_policy: ErrorPolicy = Field(
        "THROW",
        description="what a record the store refuses does: NOOP dead-letters it and goes on, THROW stops "
        "(exit 1, nothing committed past it), RETRY retries with backoff then behaves like THROW",
    )
    max_retries: int = Field(20, ge=0, description="RETRY: attempts before giving up like THROW")
    retry_interval_ms: int = Field(60_000, ge=1, description="RETRY: first backoff; doubles each attempt, jittered")
    retry_max_interval_ms: int = Field(300_000, ge=1, description="RETRY: cap of one backoff")
    outage_backoff_ms: int = Field(500, ge=1, description="store down: first wait before writing again")
    outage_max_backoff_ms: int = Field(30_000, ge=1, description="store down: cap of one wait")
    batch_size: int = Field(1000, ge=1, le=100_000, description="records per partition per write (KCQL BATCH= wins)")
    batch_age_ms: int = Field(500, ge=0, description="write a partition's records once the oldest is this old")
    poll_max_records: int = Field(2000, ge=1, description="records taken from Kafka per poll")
    # librdkafka's own default (64 MiB of payload, queued.max.messages.kbytes) let a persister
    # prefetch ~400 MiB on 24 partitions of 1.2 million aggregates and ~100 MiB on 3: the cap
    # counts payload bytes only, and each partition's fetches overshoot it. At 4 MiB the
    # hazelcast-persister peaked at ~200 MiB on 3 and 24 partitions alike, as fast as at 8 MiB
    # (2 MiB: ~160 MiB, slower on 3 partitions); bench/results/2026-11-27-backlog.md.
    prefetch_kbytes: int = Field(
        4096,
        ge=1,
        description="KiB of record payload librdkafka may prefetch for the whole consumer "
        "(queued.max.messages.kbytes; the kafka extra properties win when they set it)",
    )
    # One bound for the process, not one per partition: a pod's memory then stays the same
    # whatever the number of partitions it is given (it grew ~18-23 MiB a partition before).
    max_held_records: int = Field(
        12_000,
        ge=1,
        description="records taken from Kafka and not yet written, all partitions together; past it the "
        "runner writes what it holds and pauses every partition until below (about 1.1 KB "
        "of memory a decoded aggregate; it may go past it by two polls of poll_max_records)",
    )
    group_id: str | None = Field(None, description="consumer group; default fluxgate-<service>")
    deadletter_topic: str = Field("persisters.deadletter", min_length=1, description="where refused records go")
    value_format: RecordFormat = Field(
        "avro",
        description="how the topics' record values are written: avro (Confluent wire format, schemas in the "
        "registry), json (Kafka Connect's JsonConverter; see value_schemas_enable) or string (its StringConverter: "
        "UTF-8 text holding a JSON document, as Stream-Reactor's sinks read it)",
    )
    value_schemas_enable: bool = Field(
        True,
        description='json: each value is JsonConverter\'s envelope {"schema": ..., "payload": ...} and is read '
        "through its schema (JsonConverter's schemas.enable); false: the bare JSON value",
    )
    key_format: KeyFormat = Field(
        "string",
        description="how record keys are read where a KCQL PK names _key: string (UTF-8 text, Kafka Connect's "
        "StringConverter), json (its JsonConverter; see key_schemas_enable) or avro (Confluent's AvroConverter: "
        "the wire format, the schema in the registry under <topic>-key; a string, int or long key is the value, "
        "a record key needs PK _key.<field>); nothing else reads the key",
    )
    key_schemas_enable: bool = Field(True, description="json keys: the {schema, payload} envelope, as for values")
    # Ours keep the text (a device id 007 or 1.50 is an id); Stream-Reactor's Elastic sink parses it
    # (formats.json_first, from its JsonPayloadExtractor.scala): fluxgate connect sets json for its configs.
    string_keys: StringKeys = Field(
        "text",
        description="where a KCQL PK names _key, how a key read as a string is taken: text (as it is) or json "
        "(parsed as JSON first, a text that is not JSON kept as it is: 1.50 is the number 1.5, {...} a record "
        "key; Stream-Reactor's Elastic sink, set by fluxgate connect)",
    )
    # Kafka Connect's header.converter: the worker's SimpleHeaderConverter unless a config names another
    # (fluxgate_sink.formats.header_reader, each converter's toConnectHeader checked in the 4.4.0 jars).
    header_format: HeaderFormat = Field(
        "simple",
        description="how a header a KCQL SELECT names (_header.<name>) is read, as Kafka Connect's header "
        "converter reads it: simple (SimpleHeaderConverter, its default: the UTF-8 text typed as it reads, "
        '"42" an int, "true" a boolean, other text as it is), string (StringConverter: the text), json '
        "(JsonConverter; see header_schemas_enable), bytearray (ByteArrayConverter: the bytes), or long, "
        "integer, short, float, double, boolean (LongConverter ... BooleanConverter: big-endian, exactly 8, 4, "
        "2, 4, 8, 1 bytes); a header the converter refuses goes to the dead-letter topic with the reason",
    )
    header_schemas_enable: bool = Field(
        True,
        description="json headers: the {schema, payload} envelope, as for values (the header converter's own "
        "schemas.enable, header.converter.schemas.enable, true by default)",
    )
    from_beginning: bool = Field(False, description="ignore committed offsets once at start: replay every record")
    transforms: list[TransformConfig] = Field(
        default_factory=list,
        description="Kafka Connect Single Message Transforms applied, in order, to each decoded record before "
        'the KCQL, as JSON: [{"name": ..., "type": "org.apache.kafka.connect.transforms.InsertField$Value", '
        '"config": {"topic.field": "topic"}, "predicate": {"name": ..., "type": ..., "config": {...}}, '
        '"negate": false}]; a record a transform cannot apply to is dead-lettered with the reason',
    )

    def document_ids(self) -> MakeId:
        """How items' ids are made: Fluxgate's here; a persister with a choice overrides this."""
        from fluxgate_sink.ids import fluxgate_id  # as kcql below: the settings load without the grammar

        return fluxgate_id

    @field_validator("kcql")
    @classmethod
    def _parses(cls, text: str) -> str:
        from fluxgate_sink.kcql import parse

        try:
            parse(text)
        except KcqlError as exc:  # pydantic names the field (FLUXGATE_..._SINK__KCQL) around this message
            raise ValueError(str(exc)) from exc
        return text

    @field_validator("transforms")
    @classmethod
    def _configured(cls, configs: list[TransformConfig]) -> list[TransformConfig]:
        try:
            chain(configs)
        except TransformConfigError as exc:  # pydantic names the field (..._SINK__TRANSFORMS) around the key
            raise ValueError(str(exc)) from exc
        return configs
