"""Transforms through ``fluxgate connect``: an Elastic sink config with a chain of Kafka's transforms
(ReplaceField renames, InsertField of the topic and offset, TimestampConverter to a text, and a Filter
whose TopicNameMatches predicate drops one topic) runs against the stack: the documents in
Elasticsearch are the transformed records, the filtered topic is committed with nothing written, and a
record TimestampConverter cannot parse reaches the dead-letter topic with the reason."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from connect_runs import committed, documents, lines, produce, run_until
from fluxgate_testing import consume, unique_topic

from fluxgate_core import deadletter as dlq

pytestmark = pytest.mark.integration

KAFKA = "org.apache.kafka.connect.transforms."
AT = 1773478800123  # 2026-03-14T09:00:00.123Z


def config(folder: Path, name: str, topics: tuple[str, str], index: str, elasticsearch: str, dead: str) -> Path:
    """An Elastic sink of two JSON topics, with the chain a Stream-Reactor user would write."""
    kept, audit = topics
    path = folder / f"{name}.properties"
    path.write_text(lines(
        "# An Elastic sink with transforms, written for this test in the shape of the Stream-Reactor docs' own",
        f"name={name}",
        "connector.class=io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector",
        f"topics={kept},{audit}",
        f"connect.elastic.url={elasticsearch}",
        f"connect.elastic.kcql=INSERT INTO {index} SELECT * FROM {kept} PK device;"
        f"INSERT INTO {index} SELECT * FROM {audit} PK device",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable=false",
        "errors.tolerance=all",
        f"errors.deadletterqueue.topic.name={dead}",
        "transforms=dropAudit,rename,origin,when",
        f"transforms.dropAudit.type={KAFKA}Filter",
        "transforms.dropAudit.predicate=isAudit",
        f"transforms.rename.type={KAFKA}ReplaceField$Value",
        "transforms.rename.renames=device_id:device,temp_c:temperature",
        "transforms.rename.exclude=debug",
        f"transforms.origin.type={KAFKA}InsertField$Value",
        "transforms.origin.topic.field=source_topic",
        "transforms.origin.offset.field=source_offset",
        f"transforms.when.type={KAFKA}TimestampConverter$Value",
        "transforms.when.field=at",
        "transforms.when.target.type=string",
        "transforms.when.format=yyyy-MM-dd'T'HH:mm:ss.SSSX",
        "predicates=isAudit",
        f"predicates.isAudit.type={KAFKA}predicates.TopicNameMatches",
        f"predicates.isAudit.pattern={re.escape(audit)}",
    ))  # fmt: skip
    return path


def test_a_chain_of_transforms_shapes_the_documents_and_a_filter_drops_a_topic(
    stack: Any, elasticsearch: str, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    kept = unique_topic("connect.smt", stack.bootstrap, partitions=1)
    audit = unique_topic("connect.smt.audit", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.smt.deadletter", stack.bootstrap, partitions=1)
    readings: list[dict[str, Any]] = [
        {"device_id": f"smt-{run}-{n}", "temp_c": 20.5 + n, "at": AT + n, "debug": "x"} for n in range(3)
    ]
    bad = json.dumps({"device_id": f"smt-{run}-bad", "temp_c": 1.0, "at": "yesterday"}).encode()
    produce(stack.bootstrap, kept, [(r["device_id"], json.dumps(r).encode()) for r in readings[:2]])
    produce(stack.bootstrap, kept, [("bad", bad), (readings[2]["device_id"], json.dumps(readings[2]).encode())])
    produce(stack.bootstrap, audit, [(f"audit-{n}", json.dumps({"device_id": f"audit-{run}-{n}"}).encode())
                                     for n in range(2)])  # fmt: skip
    index, name = f"connect-smt-{run}", f"connect-smt-{run}"

    def found() -> dict[str, dict[str, Any]]:
        return documents(elasticsearch, index)

    def done() -> bool:
        group = f"connect-{name}"
        return (
            len(found()) >= 3
            and committed(stack.bootstrap, group, kept) == 4
            and committed(stack.bootstrap, group, audit) == 2  # filtered: committed, never written
        )

    path = config(tmp_path, name, (kept, audit), index, elasticsearch, dead)
    try:
        run_until(path, "FLUXGATE_ES_", stack, done, "3 documents, commits past both topics", 60)
        written = found()
    finally:
        httpx.delete(f"{elasticsearch}/{index}")
    offsets = {readings[0]["device_id"]: 0, readings[1]["device_id"]: 1, readings[2]["device_id"]: 3}
    assert written == {
        r["device_id"]: {
            "device": r["device_id"],
            "temperature": r["temp_c"],
            "at": f"2026-03-14T09:00:00.{123 + n}Z",
            "source_topic": kept,
            "source_offset": offsets[r["device_id"]],
        }
        for n, r in enumerate(readings)
    }
    [letter] = consume(stack.bootstrap, dead, expected=1, idle=1.0)
    assert letter.value == bad and letter.header(dlq.SOURCE_OFFSET) == b"2"
    reason = (letter.header(dlq.REASON) or b"").decode()
    assert reason.startswith("transforms.when: could not parse timestamp: value (yesterday)"), reason


def test_extract_field_with_a_nested_path_makes_the_document_id(stack: Any, elasticsearch: str, tmp_path: Path) -> None:
    """KIP-821's field.syntax.version=V2 on ExtractField$Key: a JSON key's nested field, its name
    holding a dot (backticks), is the record key PK _key reads."""
    run = uuid.uuid4().hex[:8]
    topic = unique_topic("connect.smt.nested", stack.bootstrap, partitions=1)
    dead = unique_topic("connect.smt.nested.deadletter", stack.bootstrap, partitions=1)
    keys = [json.dumps({"site": {"device.id": f"nested-{run}-{n}"}}) for n in range(2)]
    produce(stack.bootstrap, topic, [(k, json.dumps({"n": n}).encode()) for n, k in enumerate(keys)])
    index = name = f"connect-smt-nested-{run}"
    path = tmp_path / f"{name}.properties"
    path.write_text(lines(
        "# An Elastic sink whose record key is a nested field of a JSON key, written for this test",
        f"name={name}",
        "connector.class=io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector",
        f"topics={topic}",
        f"connect.elastic.url={elasticsearch}",
        f"connect.elastic.kcql=INSERT INTO {index} SELECT * FROM {topic} PK _key",
        "key.converter=org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable=false",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable=false",
        f"errors.deadletterqueue.topic.name={dead}",
        "transforms=id",
        f"transforms.id.type={KAFKA}ExtractField$Key",
        "transforms.id.field=site.`device.id`",
        "transforms.id.field.syntax.version=V2",
    ))  # fmt: skip

    def done() -> bool:
        return len(documents(elasticsearch, index)) >= 2

    try:
        run_until(path, "FLUXGATE_ES_", stack, done, "2 documents", 60)
        written = documents(elasticsearch, index)
    finally:
        httpx.delete(f"{elasticsearch}/{index}")
    assert written == {f"nested-{run}-{n}": {"n": n} for n in range(2)}
