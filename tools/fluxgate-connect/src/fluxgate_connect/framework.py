"""What every connector of the table shares: the :class:`Connector` record, Kafka Connect's own
keys (:func:`framework`), the sinks' KCQL, error policy, retries and batch size
(:func:`sink_options`), and the helpers the tables of :mod:`fluxgate_connect.sources` and
:mod:`fluxgate_connect.sinks` are written with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic_settings import BaseSettings

from fluxgate_connect import topic_creation, transforms
from fluxgate_connect.rules import (
    Covered,
    Rule,
    RuleError,
    Setting,
    Unsupported,
    boolean,
    error_policy,
    integer,
    text,
    to,
)
from fluxgate_sink.header_values import FIXED_WIDTH

# Settings the gateways gain with issue #23's source KCQL and CoAP record (other branches):
# the only names of the table that are not yet fields of the services' Settings classes.
MQTT_KCQL = "kcql"
COAP_KCQL = "kcql"
COAP_SOURCE_URI = "source_uri"
COAP_OUTPUT_FORMAT = "output_format"
COAP_MESSAGE = "coap-message"  # Stream-Reactor's CoAP record, what its consumers read


@dataclass(frozen=True)
class Connector:
    """One connector class family and the Fluxgate service doing its job."""

    title: str
    service: str  # the chart under deploy/charts has the same name
    script: str  # the service's console script
    settings: type[BaseSettings]
    classes: tuple[str, ...]
    rules: Mapping[str, Rule]
    sink: bool
    fixed: Mapping[str, str] = field(default_factory=dict)  # settings every such config implies
    # Settings a config implies unless one of its keys sets them (Stream-Reactor's default where ours differs).
    defaults: Mapping[str, str] = field(default_factory=dict)
    # Where one of its classes sets a fixed or default setting otherwise: said in the reference table.
    exceptions: Mapping[str, str] = field(default_factory=dict)
    # Settings the service's chart sets per pod (an MQTT client id per replica): not in its values.
    chart_owned: frozenset[str] = frozenset()

    @property
    def prefix(self) -> str:
        return str(self.settings.model_config.get("env_prefix", ""))


def both(prefix: str, names: Mapping[str, Rule]) -> dict[str, Rule]:
    return {f"{prefix}.{name}": rule for name, rule in names.items()}


def aliases(rule: Rule, *keys: str) -> dict[str, Rule]:
    return dict.fromkeys(keys, rule)


# Kafka Connect's error handling of converters and transforms (KIP-298): our services never
# stop on a record they cannot decode and never drop one; they dead-letter it with the reason.
SOURCE_ERRORS = Covered(
    "a payload the gateway cannot turn into a record goes to the dead-letter topic with the reason in its "
    "headers and the gateway goes on; Kafka errors are retried until the record is delivered"
)
PROGRESS = Covered("every service counts what it processed on /metrics (Prometheus)")
AVRO = ("io.confluent.connect.avro.AvroConverter", "io.apicurio.registry.utils.converter.AvroConverter")


JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
BYTES_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
SIMPLE_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
# connect-runtime's fixed-width converters, each also a HeaderConverter (its META-INF/services lists them).
NUMBER_CONVERTERS = {
    f"org.apache.kafka.connect.converters.{converter}": name for name, (converter, _, _) in FIXED_WIDTH.items()
}
HEADER_FORMATS = {
    SIMPLE_HEADER_CONVERTER: "simple",
    STRING_CONVERTER: "string",
    JSON_CONVERTER: "json",
    BYTES_CONVERTER: "bytearray",
    **NUMBER_CONVERTERS,
}


def value_format(value: str) -> dict[str, str]:
    """A sink's ``value.converter`` as the format its values are read in (Avro is the default)."""
    name = value.strip()
    if name in AVRO:
        return {}
    if name == JSON_CONVERTER:
        return {"sink.value_format": "json"}
    if name == STRING_CONVERTER:  # Stream-Reactor's sinks read the text as a JSON document
        return {"sink.value_format": "string"}
    if name == BYTES_CONVERTER:
        raise RuleError(
            "a sink writes records with fields, and this converter gives bytes; JSON in them reads as records "
            f"with value.converter={STRING_CONVERTER}, or {JSON_CONVERTER} and value.converter.schemas.enable=false"
        )
    raise RuleError(f"expected {' or '.join((*AVRO, JSON_CONVERTER, STRING_CONVERTER))}")


def source_value_format(service: str, record: str) -> Callable[[str], dict[str, str]]:
    """A source's ``value.converter`` as the format its gateway (``service``, writing ``record``)
    writes in (Avro is the default): what the users' consumers of the topic read today."""

    def convert(value: str) -> dict[str, str]:
        name = value.strip()
        if name in AVRO:
            return {}
        if name == JSON_CONVERTER:
            return {"output.value_format": "json"}
        if name == STRING_CONVERTER:
            return {"output.value_format": "string"}
        if name == BYTES_CONVERTER:
            raise RuleError(
                f"{service} writes records with fields ({record}), not a payload's bytes; consumers of JSON "
                f"read them with value.converter={JSON_CONVERTER} and value.converter.schemas.enable=false (the "
                f"record's JSON), or {STRING_CONVERTER} (the same JSON as text)"
            )
        raise RuleError(f"expected {' or '.join((*AVRO, JSON_CONVERTER, STRING_CONVERTER))}")

    return convert


def source_key_format(value: str) -> dict[str, str]:
    """A source's ``key.converter`` as the format its gateway writes the record key in (the device id, or
    KCQL WITHKEY's values: text, as Stream-Reactor's MQTT source keys with WITHKEY, a Connect string)."""
    name = value.strip()
    if name in (STRING_CONVERTER, BYTES_CONVERTER):  # the text's UTF-8 bytes: what both read (the default)
        return {}
    if name == JSON_CONVERTER:
        return {"output.key_format": "json"}
    if name in AVRO:
        return {"output.key_format": "avro"}
    raise RuleError(f"expected {' or '.join((STRING_CONVERTER, JSON_CONVERTER, BYTES_CONVERTER, *AVRO))}")


def utf8_only(side: str, reads: str) -> Covered:
    """``<side>.converter.encoding``: StringConverter's charset (StringConverterConfig's converter.encoding,
    UTF-8 by default), which Fluxgate always ``reads`` in UTF-8; another charset is refused, not misread."""
    return Covered(
        f"StringConverter's charset for {side}s, UTF-8 by default: Fluxgate {reads} in UTF-8 only; another "
        "charset is refused: remove the key",
        accept=("UTF-8", "UTF8"),
    )


def source_converters(service: str, record: str) -> dict[str, Rule]:
    """A source's converters: its gateway writes its records as the config names (its
    OUTPUT__VALUE_FORMAT and OUTPUT__VALUE_SCHEMAS_ENABLE, its keys OUTPUT__KEY_FORMAT and
    OUTPUT__KEY_SCHEMAS_ENABLE: fluxgate_core.json_records)."""
    return {
        "key.converter.schema.registry.url": to(
            "registry.url",
            text,
            note="the one registry of Avro keys and values (value.converter.schema.registry.url wins when both "
            "are set)",
        ),
        "key.converter": Setting(
            ("output.key_format",),
            source_key_format,
            note="the record key is text (the device id, KCQL WITHKEY's values, coap-message's resource URI): "
            f"{STRING_CONVERTER} or ByteArrayConverter: its UTF-8 text (the default); {JSON_CONVERTER}: the "
            f"JSON string (see key.converter.schemas.enable); {AVRO[0]} (or Apicurio's): an Avro string in "
            "the Confluent wire format, the schema registered under <topic>-key",
        ),
        "key.converter.schemas.enable": to(
            "output.key_schemas_enable",
            boolean,
            note='JsonConverter\'s, for keys: true (its default) writes {"schema":{"type":"string","optional":false},'
            '"payload":"<key>"}, false the bare JSON string; with other key converters it means nothing and is not set',
        ),
        "value.converter": Setting(
            ("output.value_format",),
            source_value_format(service, record),
            note=f"{AVRO[0]} (or Apicurio's): Avro in the Confluent wire format, the schema registered in the "
            f"registry (the default); {JSON_CONVERTER}: the record as JsonConverter writes it (see "
            f"value.converter.schemas.enable), no registry; {STRING_CONVERTER}: the record's JSON as text, "
            "no registry",
        ),
        "value.converter.schemas.enable": to(
            "output.value_schemas_enable",
            boolean,
            note="JsonConverter's: true (its default) writes each record as the {schema, payload} envelope, false "
            "the bare JSON; with other converters it means nothing and is not set",
        ),
        "key.converter.encoding": utf8_only("key", "writes them"),
        "value.converter.encoding": utf8_only("value", "writes them"),
    }


MQTT_SOURCE_CONVERTERS = source_converters("mqtt-proxy", "SensorReading, schemas/sensor_reading.avsc")
# A CoAP source config always has coap-ingest write Stream-Reactor's record (COAP_MESSAGE).
COAP_SOURCE_CONVERTERS = source_converters("coap-ingest", "CoapMessage, schemas/coap_message.avsc")


def key_format(value: str) -> dict[str, str]:
    """A sink's ``key.converter`` as the format ``PK _key`` reads keys in (text is the default)."""
    name = value.strip()
    if name == JSON_CONVERTER:
        return {"sink.key_format": "json"}
    if name in AVRO:
        return {"sink.key_format": "avro"}
    if name in (STRING_CONVERTER, BYTES_CONVERTER):
        return {}
    raise RuleError(f"expected {' or '.join((STRING_CONVERTER, JSON_CONVERTER, BYTES_CONVERTER, *AVRO))}")


def header_format(value: str) -> dict[str, str]:
    """A sink's ``header.converter`` as the format a header a SELECT names is read in (Simple is the default)."""
    found = HEADER_FORMATS.get(value.strip())
    if found is None:
        raise RuleError(f"expected {' or '.join(HEADER_FORMATS)}")
    return {} if found == "simple" else {"sink.header_format": found}


# A sink's converters: the formats are the shared sink runtime's (fluxgate_sink.formats), the same
# for every persister; the key is read only for a PK that names it.
SINK_CONVERTERS: dict[str, Rule] = {
    "value.converter": Setting(
        ("sink.value_format",),
        value_format,
        note=f"{AVRO[0]} (or Apicurio's): Avro in the Confluent wire format, schemas in the registry (the default); "
        f"{JSON_CONVERTER}: JSON, read as Kafka Connect reads it (see value.converter.schemas.enable); "
        # Checked against lensesio/stream-reactor: the Elastic sinks (JsonPayloadExtractor.scala) and
        # the Cassandra sink before 10.x (ToJsonWithProjections.scala) parse the text with a default
        # Jackson mapper (JacksonJson.scala); the Hazelcast sink stores the text whole as a JSON string
        # (writers/Writer.scala, SimpleJsonConverter.scala's TextNode), and hazelcast-persister does the
        # same (values.text_json); the 10.x Cassandra sink reads it otherwise (docs/kafka-connect.md,
        # JSON edge cases; fluxgate_sink.formats).
        f"{STRING_CONVERTER}: UTF-8 text holding a JSON document, read as Stream-Reactor's Elastic and "
        "Cassandra (before 10.x) sinks read it; hazelcast-persister stores the whole text as one JSON string, "
        "as its Hazelcast sink does, JSON or not (see JSON edge cases, and for its 10.x Cassandra sink); "
        "elsewhere a value that is not a JSON object goes to the dead-letter topic with the reason",
    ),
    "value.converter.schemas.enable": to(
        "sink.value_schemas_enable",
        boolean,
        note="JsonConverter's: true (its default) reads each value as the {schema, payload} envelope, through "
        "its schema; false reads the bare JSON; with other converters it means nothing and is not set",
    ),
    "key.converter": Setting(
        ("sink.key_format",),
        key_format,
        note="read only where a KCQL PK or SELECT names _key (the record key as the id, as Stream-Reactor's "
        "PK _key; SELECT _key.<field> writes a field of it): "
        f"{STRING_CONVERTER} or ByteArrayConverter as UTF-8 text (the default), {JSON_CONVERTER} as JSON (see "
        f"key.converter.schemas.enable), {AVRO[0]} (or Apicurio's) through the registry (the schema under "
        "<topic>-key): a string, int or long key is the id; a record key is read by its fields, _key.<field> "
        "(PK _key itself dead-letters such a record, the reason naming it, where Stream-Reactor fails the record); "
        "a key that does not decode goes to the dead-letter topic with the reason",
    ),
    "key.converter.schema.registry.url": to(
        "registry.url",
        text,
        note="the one registry of Avro keys and values (value.converter.schema.registry.url wins when both are set)",
    ),
    "key.converter.schemas.enable": to(
        "sink.key_schemas_enable",
        boolean,
        note="JsonConverter's, for keys: true (its default) reads the {schema, payload} envelope, false the bare "
        "JSON; with other keys it means nothing and is not set",
    ),
    # Read as the worker's header converter reads it (fluxgate_sink.formats.header_reader, each
    # toConnectHeader run in the connect 4.4.0 jars); WorkerConfig's default is SimpleHeaderConverter.
    "header.converter": Setting(
        ("sink.header_format",),
        header_format,
        note="read only where a KCQL SELECT names a header (_header.<name>): "
        f"{SIMPLE_HEADER_CONVERTER} (Kafka Connect's default): its UTF-8 text, typed as that text reads "
        '("42" an int, "true" a boolean, "2026-11-23" a date, "[1,2]" a list, other text as it is); '
        f"{STRING_CONVERTER}: the UTF-8 text; {JSON_CONVERTER}: the JSON (see header.converter.schemas.enable); "
        f"{BYTES_CONVERTER}: the bytes (base64 in Elasticsearch and Hazelcast JSON; Scylla AUTOCREATE "
        "makes a blob column); "
        f"{', '.join(NUMBER_CONVERTERS)}: the big-endian number or boolean of exactly 8, 4, 2, 4, 8 or 1 "
        "bytes; a header the converter refuses (not JSON, another width) goes to the dead-letter topic with "
        "the reason, where Kafka Connect fails the record (errors.tolerance)",
    ),
    "header.converter.schemas.enable": to(
        "sink.header_schemas_enable",
        boolean,
        note="JsonConverter's, for headers: true (its default) reads the {schema, payload} envelope, false the "
        "bare JSON; with other header converters it means nothing and is not set",
    ),
    "key.converter.encoding": utf8_only("key", "reads them"),
    "value.converter.encoding": utf8_only("value", "reads them"),
    "header.converter.encoding": utf8_only("header", "reads them"),
}


def tasks(members: str) -> Covered:
    """tasks.max: how ``fluxgate connect``'s members (:mod:`fluxgate_connect.tasks`) share the work."""
    return Covered(
        f"`fluxgate connect` runs tasks.max processes of the service, {members}, each serving health on "
        "http.port + its index (0, 1, ...); --print-values sets the chart's replicaCount to it"
    )


SINK_TASKS = tasks(
    "members of the consumer group, each a static member `<group>-<index>` (its KAFKA__GROUP_INSTANCE_ID)"
)
MQTT_TASKS = tasks(
    "sharing the subscriptions as `$share/<name>/<filter>` (FLUXGATE_MQTT_MQTT__SHARE_GROUP, the connector's "
    "name unless set; --print-values makes it the chart's shareGroup), each with the MQTT client id "
    "`<client id>-<index>`"
)
COAP_TASKS = tasks(
    "each observing every tasks.max-th resource (FLUXGATE_COAP_MEMBERS and FLUXGATE_COAP_MEMBER, its index)"
)


def framework(sink: bool, tasks: Covered, converters: Mapping[str, Rule] | None = None) -> dict[str, Rule]:
    """Kafka Connect's own keys, the same for every connector of a kind; a source's
    ``converters`` are its :func:`source_converters` (a sink's are :data:`SINK_CONVERTERS`)."""
    rules: dict[str, Rule] = {
        "tasks.max": tasks,
        "value.converter.schema.registry.url": to("registry.url", text),
        "key.converter.schema.registry.url": Covered("the registry is value.converter's"),
        "connect.progress.enabled": PROGRESS,
        **aliases(
            Covered("records are retried, dead-lettered and logged by the service itself, never dropped"),
            "errors.retry.timeout",
            "errors.retry.delay.max.ms",
            "errors.log.enable",
            "errors.log.include.messages",
        ),
    }
    if sink:
        rules |= {
            "name": Setting(
                ("sink.group_id",),
                lambda value: {"sink.group_id": f"connect-{text(value)}"},
                note="connect-<name>, the sink connector's consumer group: the persister goes on from its offsets",
            ),
            "topics": Covered("the topics must be the ones the KCQL reads (checked): the KCQL is what is read"),
            "topics.regex": Unsupported("list the topics in the KCQL (one statement per topic)"),
            **SINK_CONVERTERS,
            "errors.tolerance": Covered(
                "none or all, a record that cannot be decoded goes to the dead-letter topic "
                "(errors.deadletterqueue.topic.name, else sink.deadletter_topic) with the reason in its headers, "
                "and the sink goes on: it neither stops (none) nor drops the record (all without a topic)"
            ),
            "errors.deadletterqueue.topic.name": to("sink.deadletter_topic", text),
            "errors.deadletterqueue.topic.replication.factor": Covered(
                "a missing dead-letter topic is created with 3 partitions and the broker's default replication "
                "(default.replication.factor); one created beforehand is used as it is"
            ),
            "errors.deadletterqueue.context.headers.enable": Covered("the reason is always in the headers"),
            **transforms.SINK_RULES,
        }
    else:
        rules |= {
            "errors.tolerance": SOURCE_ERRORS,
            "name": to("kafka.client_id", text, note="the Kafka client id"),
            **(converters or {}),
            **transforms.SOURCE_RULES,
            **topic_creation.RULES,
        }
    return rules


def sink_options(prefix: str, *, legacy_sink_prefix: bool, export_route: bool = False) -> dict[str, Rule]:
    """KCQL, error policy, retries and batch size: Stream-Reactor's names, our shared sink settings."""
    rules: dict[str, Rule] = {
        "kcql": to("sink.kcql", text),
        "error.policy": to("sink.error_policy", error_policy),
        "max.retries": to("sink.max_retries", integer),
        "retry.interval": to("sink.retry_interval_ms", integer),
        "batch.size": to("sink.batch_size", integer),
    }
    named = both(prefix, rules)
    if legacy_sink_prefix:  # before 1.0: connect.<system>.sink.kcql and friends
        named |= both(f"{prefix}.sink", rules)
    if export_route:  # 2016's first releases named the KCQL export.route.query (datamountaineer docs)
        named[f"{prefix}.export.route.query"] = rules["kcql"]
    return named


def jks(instead: str) -> Unsupported:
    return Unsupported(
        f"Java key stores are not read: give {instead} a PEM file "
        "(`keytool -exportcert -rfc -alias <alias> -keystore <store>` writes one)"
    )
