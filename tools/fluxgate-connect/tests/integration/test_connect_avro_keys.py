"""Avro record keys through ``fluxgate connect``: an Elastic sink config with Confluent's AvroConverter
for keys and ``PK _key`` moves Avro-valued records into Elasticsearch, each document's id its record's
Avro key (a string on one topic, a long on another, each schema registered under ``<topic>-key``),
read back by that id. A key that is not Avro, and a record key (no single value for ``PK _key``), reach
the config's dead-letter topic with the reason, and the group commits past them."""

from __future__ import annotations

import io
import json
import struct
import uuid
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import Producer
from connect_runs import aggregates, committed, lines, run_until
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter as dlq
from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroEncoder, key_subject, register

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"
SITE_KEY = '{"type": "record", "name": "SiteKey", "fields": [{"name": "site", "type": "string"}]}'


def avro_key(schema_id: int, schema: str, datum: Any) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(json.loads(schema)), datum)
    return struct.pack(">bI", 0, schema_id) + body.getvalue()


def produce(stack: Any, registry_client: Any, topic: str, records: list[tuple[bytes, dict[str, Any]]]) -> None:
    """Avro TemperatureAggregate values with the given raw keys, in order, into partition 0."""
    values = AvroEncoder.registered(
        registry_client, topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, values.encode(value), key, partition=0)
    assert producer.flush(30) == 0


def test_pk_key_reads_avro_keys_as_document_ids_and_dead_letters_what_it_cannot(
    stack: Any, registry_client: Any, elasticsearch: str, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    texts = unique_topic("connect.avrokeys.text", stack.bootstrap, partitions=1)
    longs = unique_topic("connect.avrokeys.long", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.avrokeys.deadletter", stack.bootstrap, partitions=1)
    string_id = register(registry_client, key_subject(texts), '"string"', "BACKWARD")
    long_id = register(registry_client, key_subject(longs), '"long"', "BACKWARD")
    site_id = register(registry_client, f"{longs}-sitekey", SITE_KEY, None)  # another subject: any id decodes
    values = aggregates(6)
    text_keys = [f"sensor-{run}-{n}" for n in range(3)]
    long_keys = [2**40 + n for n in range(2)]
    produce(stack, registry_client, texts, [
        *((avro_key(string_id, '"string"', key), value) for key, value in zip(text_keys, values[:3], strict=True)),
        (b"plain-text-key", values[3]),  # StringConverter's bytes, not Avro: does not decode
    ])  # fmt: skip
    produce(stack, registry_client, longs, [
        (avro_key(long_id, '"long"', long_keys[0]), values[4]),
        (avro_key(site_id, SITE_KEY, {"site": "s1"}), values[0]),  # a record key: no single value for PK _key
        (avro_key(long_id, '"long"', long_keys[1]), values[5]),
    ])  # fmt: skip
    name, by_text, by_long = f"connect-avrokeys-{run}", f"connect-avrokeys-text-{run}", f"connect-avrokeys-long-{run}"
    path = tmp_path / "elastic-avro-keys.properties"
    path.write_text(lines(
        "# An Elastic sink of Avro keys and values, written for this test in the shape of the Stream-Reactor docs'",
        f"name={name}",
        "connector.class=io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector",
        f"topics={texts},{longs}",
        f"connect.elastic.url={elasticsearch}",
        f"connect.elastic.kcql=INSERT INTO {by_text} SELECT * FROM {texts} PK _key;"
        f"INSERT INTO {by_long} SELECT * FROM {longs} PK _key",
        f"key.converter={AVRO}",
        f"key.converter.schema.registry.url={stack.registry_url}",
        f"value.converter={AVRO}",
        f"value.converter.schema.registry.url={stack.registry_url}",
        "errors.tolerance=all",
        f"errors.deadletterqueue.topic.name={dead}",
    ))  # fmt: skip

    def by_id(index: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        found = {}
        for document_id in ids:
            answer = httpx.get(f"{elasticsearch}/{index}/_doc/{document_id}")
            if answer.status_code == 200:
                found[document_id] = answer.json()["_source"]
        return found

    long_ids = [str(key) for key in long_keys]

    def done() -> bool:
        return (
            len(by_id(by_text, text_keys)) == 3
            and len(by_id(by_long, long_ids)) == 2
            and committed(stack.bootstrap, f"connect-{name}", texts) == 4
            and committed(stack.bootstrap, f"connect-{name}", longs) == 3
        )

    try:
        run_until(path, "FLUXGATE_ES_", stack, done, "5 documents by their Avro keys, commits past all", 90)
        texts_written, longs_written = by_id(by_text, text_keys), by_id(by_long, long_ids)
    finally:
        httpx.delete(f"{elasticsearch}/{by_text}")
        httpx.delete(f"{elasticsearch}/{by_long}")
    assert {key: doc["device_id"] for key, doc in texts_written.items()} == {
        key: value["device_id"] for key, value in zip(text_keys, values[:3], strict=True)
    }
    assert {key: doc["device_id"] for key, doc in longs_written.items()} == {
        long_ids[0]: values[4]["device_id"],
        long_ids[1]: values[5]["device_id"],
    }
    letters = {letter.header(dlq.SOURCE_TOPIC): letter for letter in consume(stack.bootstrap, dead, expected=2)}
    plain, record_key = letters[texts.encode()], letters[longs.encode()]
    assert plain.key == b"plain-text-key" and plain.header(dlq.SOURCE_OFFSET) == b"3"
    assert (plain.header(dlq.REASON) or b"").decode().startswith("the record key does not decode: unknown magic byte")
    assert record_key.header(dlq.SOURCE_OFFSET) == b"1"
    assert "the record key is a record (fields site), not one value" in (record_key.header(dlq.REASON) or b"").decode()
