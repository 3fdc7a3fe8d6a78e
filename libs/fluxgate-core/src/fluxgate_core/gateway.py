"""What every gateway (mqtt-proxy, coap-ingest) opens before it reads a device message.

In this order, so a broken dependency fails the start before anything is read: the
gateway's record schema (``SensorReading``, or coap-ingest's ``CoapMessage``) registered under
``<topic>-value`` for every target topic (the registry must answer), the producer's
batches fitted to every topic's size limit (the dead-letter topic's too: Kafka must
answer), the producer started, a :class:`~fluxgate_core.topic_watch.TopicWatch` on every
topic (one deleted while running makes the gateway unready); then a dead-letter
writer that keeps what the limits allow of a rejected payload.

The record's value is written as :class:`~fluxgate_core.json_records.OutputSettings` says: Avro
through the registry (the default), or as Kafka Connect's JsonConverter or StringConverter writes it
(:mod:`fluxgate_core.json_records`), when the registry is neither checked nor contacted: a Connect
cluster with those converters has none. Its key, as ``output.key_format`` says (:func:`with_key`, for
every topic, at start and at run time): StringConverter's text by default, JsonConverter's, or Avro
registered under ``<topic>-key`` (then the registry is checked and used, whatever the values are).

A target met only at run time (mqtt-proxy's ``INSERT INTO $``, where the device's topic
names it) is registered with :func:`register_targets`: a subject the registry refuses, or a
topic that does not exist (and is not created), is that target's answer (its messages are
dead-lettered), not a failure of the gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka.schema_registry import SchemaRegistryClient

from fluxgate_core.batches import fit_batches_to_topics
from fluxgate_core.deadletter import DeadLetterWriter
from fluxgate_core.errors import InvalidReading, RegistryError
from fluxgate_core.json_records import KeyedEncoder, OutputSettings, connect_encoder, json_key_encoder
from fluxgate_core.kafka import AsyncProducer, make_producer
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.limits import LimitSettings
from fluxgate_core.registry_access import registrations_named, verify_registry
from fluxgate_core.schemas import SENSOR_READING, schema_dict, schema_text
from fluxgate_core.serde import AvroEncoder, RecordEncoder, avro_string_key, registry_client
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_core.topic_access import unusable_topics
from fluxgate_core.topic_watch import TopicWatch

W = TypeVar("W", bound=DeadLetterWriter)
AVRO_OUTPUT = OutputSettings()
# The registry's answers that are about the request, not about the registry being away.
_NOT_REFUSALS = frozenset({408, 429})


class SubjectRefused(InvalidReading):
    """A target met at run time the gateway may not write: the registry refused the record schema
    under its subject (an answer 4xx: another, incompatible schema is there, or the name is not one
    it takes), or its topic does not exist and is not to be created. The input is dead-lettered."""


@dataclass(frozen=True)
class GatewayOutput:
    service: str
    deadletter_topic: str
    encoders: dict[str, RecordEncoder]  # target topic -> its encoder (Avro: the schema's, under its subject)
    producer: AsyncProducer  # started
    watch: TopicWatch  # started: whether every topic is still there (fold present() into ready())

    def dead_letters(self, writer: type[W], limits: LimitSettings) -> W:
        """A ``writer`` (a :class:`DeadLetterWriter`) on this producer: whole payloads up to the
        limit, else their head."""
        return writer(
            self.producer,
            self.deadletter_topic,
            self.service,
            max_whole_bytes=limits.max_payload_bytes,
            head_bytes=limits.deadletter_head_bytes,
        )


def register_readings(
    registry: RegistrySettings, topics: Iterable[str], schema_name: str = SENSOR_READING
) -> dict[str, AvroEncoder]:
    """Register ``schemas/<schema_name>.avsc`` (``SensorReading`` by default) under
    ``<topic>-value`` for each topic; its encoder per topic."""
    client = registry_client(registry)
    text, schema = schema_text(schema_name), schema_dict(schema_name)
    level = registry.compatibility
    return {topic: AvroEncoder.registered(client, topic, text, schema, level) for topic in sorted(set(topics))}


def register_targets(
    registry: RegistrySettings,
    topics: Iterable[str],
    schema_name: str = SENSOR_READING,
    *,
    kafka: KafkaSettings | None = None,
    service: str = "",
    env_prefix: str = "",
    output: OutputSettings = AVRO_OUTPUT,
) -> dict[str, RecordEncoder | SubjectRefused]:
    """:func:`register_readings` for targets met at run time: per topic its encoder, or why the
    registry refused its subject. A registry away (or answering 5xx) still raises
    :class:`~fluxgate_core.errors.RegistryError` (retriable: nothing of the input is lost).
    With ``kafka``, each topic must exist first (created if ``kafka.topic_creation`` says so),
    else it is refused naming the command that creates it: a producer would hold its records
    with no end. With an ``output`` that needs no registry, each topic there gets its encoder."""
    wanted = sorted(set(topics))
    absent = unusable_topics(kafka, service, wanted, env_prefix) if kafka is not None and wanted else {}
    answers: dict[str, RecordEncoder | SubjectRefused] = {topic: SubjectRefused(why) for topic, why in absent.items()}
    usable = [topic for topic in wanted if topic not in absent]
    if not output.uses_registry:
        encoder = with_key(connect_encoder(output, schema_dict(schema_name)), output)
        return answers | dict.fromkeys(usable, encoder)
    client = registry_client(registry)
    text, schema = schema_text(schema_name), schema_dict(schema_name)
    values = None if output.value_format == "avro" else connect_encoder(output, schema)
    for topic in usable:
        try:
            value = values or AvroEncoder.registered(client, topic, text, schema, registry.compatibility)
            answers[topic] = with_key(value, output, topic, client, registry.compatibility)
        except RegistryError as exc:
            if not refused(exc):
                raise
            answers[topic] = SubjectRefused(str(exc))  # it names the subject and says why
    return answers


def with_key(
    encoder: RecordEncoder,
    output: OutputSettings,
    topic: str = "",
    client: SchemaRegistryClient | None = None,
    compatibility: str | None = None,
) -> RecordEncoder:
    """``encoder`` (of ``topic``'s values) writing its record keys as ``output.key_format`` says: the one
    place both gateways' keys are chosen. Avro keys register under ``<topic>-key`` through ``client``."""
    if output.key_format == "string":
        return encoder  # every value encoder writes StringConverter's keys itself
    if output.key_format == "json":
        return KeyedEncoder(encoder, json_key_encoder(output.key_schemas_enable))
    if client is None:
        raise ValueError(f"Avro keys of {topic!r} are registered: a registry client is needed")
    return KeyedEncoder(encoder, avro_string_key(client, topic, compatibility))


def _keyed(
    encoders: dict[str, RecordEncoder], output: OutputSettings, registry: RegistrySettings
) -> dict[str, RecordEncoder]:
    """Every topic's encoder of :func:`open_gateway_output` with its keys (registered at start, Avro)."""
    client = registry_client(registry) if output.key_format == "avro" else None
    return {topic: with_key(e, output, topic, client, registry.compatibility) for topic, e in encoders.items()}


def refused(exc: RegistryError) -> bool:
    """The registry answered, and no: a 4xx about the request (not a timeout or a rate limit)."""
    status = getattr(exc.__cause__, "http_status_code", None)
    return isinstance(status, int) and 400 <= status < 500 and status not in _NOT_REFUSALS


async def open_gateway_output(
    service: str,
    kafka: KafkaSettings,
    registry: RegistrySettings,
    topics: Iterable[str],
    deadletter_topic: str,
    max_in_flight: int,
    schema_name: str = SENSOR_READING,
    *,
    env_prefix: str,
    topics_setting: str = "",
    output: OutputSettings = AVRO_OUTPUT,
) -> GatewayOutput:
    """Kafka checked (the login, every topic there or created), the schemas
    (``schemas/<schema_name>.avsc``) registered (Avro ``output`` only), then the fitted producer,
    started (see the module). ``env_prefix`` is the service's and ``topics_setting`` the setting
    naming ``topics`` (``kcql``), for errors that name the setting to fix."""
    topics = list(topics)
    named = {**dict.fromkeys(topics, topics_setting), deadletter_topic: "deadletter_topic"}
    await asyncio.to_thread(verify_kafka, kafka, service, env_prefix, named)
    encoders: dict[str, RecordEncoder]
    if output.uses_registry:
        await asyncio.to_thread(verify_registry, registry, env_prefix)  # a refused secret or CA: named, exit 2
    with registrations_named(registry, env_prefix):  # a readonly client: named, exit 2
        if output.value_format == "avro":
            encoders = dict(await asyncio.to_thread(register_readings, registry, topics, schema_name))
        else:  # Kafka Connect's JSON or text: one encoder for every topic, no registry
            encoders = dict.fromkeys(sorted(set(topics)), connect_encoder(output, schema_dict(schema_name)))
        encoders = await asyncio.to_thread(_keyed, encoders, output, registry)
    every_topic = [*encoders, deadletter_topic]
    config = await asyncio.to_thread(fit_batches_to_topics, kafka.producer_config(service), every_topic)
    producer = make_producer(config, max_in_flight=max_in_flight)
    await producer.start()
    return GatewayOutput(service, deadletter_topic, encoders, producer, TopicWatch(kafka, service, named).start())
