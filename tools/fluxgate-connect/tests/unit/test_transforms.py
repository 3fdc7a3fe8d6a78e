"""Kafka Connect's transforms and predicates keys: a sink's chain becomes SINK__TRANSFORMS, which the
persister's Settings load; a class that is not Kafka's or a wrong option stops it naming the key (a
source's transforms are refused: see the corpus, tests/unit/test_corpus.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from connect_fixtures import fixture, load_env

from fluxgate_connect.errors import ConnectError
from fluxgate_connect.translate import translate

ES = "io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector"
KAFKA = "org.apache.kafka.connect.transforms."


def sink(**keys: str) -> dict[str, str]:
    return {"connector.class": ES, "name": "es", "topics": "t", "connect.elastic.url": "http://es:9200",
            "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t", **keys}  # fmt: skip


def chain(**keys: str) -> list[dict[str, Any]]:
    return json.loads(translate(sink(**keys)).values["sink.transforms"])  # type: ignore[no-any-return]


def refusal(**keys: str) -> str:
    with pytest.raises(ConnectError) as raised:
        translate(sink(**keys))
    return str(raised.value)


def test_the_chain_keeps_its_order_options_predicates_and_negate() -> None:
    found = chain(**{
        "transforms": "drop, rename",
        "transforms.rename.type": f"{KAFKA}ReplaceField$Value",
        "transforms.rename.renames": "a:b",
        "transforms.drop.type": f"{KAFKA}Filter",
        "transforms.drop.predicate": "tomb",
        "transforms.drop.negate": "false",
        "predicates": "tomb",
        "predicates.tomb.type": f"{KAFKA}predicates.RecordIsTombstone",
    })  # fmt: skip
    assert found == [
        {"name": "drop", "type": f"{KAFKA}Filter", "config": {}, "negate": False,
         "predicate": {"name": "tomb", "type": f"{KAFKA}predicates.RecordIsTombstone", "config": {}}},
        {"name": "rename", "type": f"{KAFKA}ReplaceField$Value", "config": {"renames": "a:b"}},
    ]  # fmt: skip


def test_the_persister_loads_the_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    result = fixture("elastic-sink-confluent-smt.properties")
    transforms = load_env(result.connector.settings, result.env, monkeypatch).sink.transforms
    assert [(t.name, t.config) for t in transforms] == [
        ("RenameField", {"renames": "foo:c1,bar:c2"}), ("createKey", {"fields": "c1"}), ("extractInt", {"field": "c1"})
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"transforms": "x", "transforms.x.type": "org.apache.kafka.connect.transforms.RegexRouter"},
         "transforms.x.type: org.apache.kafka.connect.transforms.RegexRouter is not supported; the supported "
         "transforms are org.apache.kafka.connect.transforms.InsertField$Key,"),
        ({"transforms": "x"}, "transforms.x.type: required: the class"),
        ({"transforms": "x", "transforms.x.type": f"{KAFKA}Cast$Value", "transforms.x.spec": "a:date"},
         "transforms.x.spec: 'a:date': cannot cast to 'date'"),
        ({"transforms": "x", "transforms.x.type": f"{KAFKA}Filter", "transforms.x.predicate": "p"},
         "transforms.x.predicate: p is not one of predicates"),
        ({"transforms": "x", "transforms.x.type": f"{KAFKA}Filter", "transforms.x.predicate": "p", "predicates": "p",
          "predicates.p.type": f"{KAFKA}predicates.HasHeaderKey"}, "predicates.p.name: required"),
        ({"transforms": "x", "transforms.x.type": f"{KAFKA}Filter", "transforms.x.negate": "maybe",
          "transforms.x.predicate": "p", "predicates": "p",
          "predicates.p.type": f"{KAFKA}predicates.RecordIsTombstone"},
         "transforms.x.negate: expected true or false"),
        ({"transforms": "x,x", "transforms.x.type": f"{KAFKA}Filter"}, "transforms=x,x: a name is listed twice"),
    ],
)  # fmt: skip
def test_a_bad_chain_is_refused_naming_the_key(keys: dict[str, str], message: str) -> None:
    assert message in refusal(**keys)


def test_an_option_the_class_does_not_have_is_ignored_with_a_warning_as_kafka_connect_does() -> None:
    result = translate(sink(**{"transforms": "x", "transforms.x.type": f"{KAFKA}HoistField$Value",
                               "transforms.x.field": "v", "transforms.x.feild": "w"}))  # fmt: skip
    assert json.loads(result.values["sink.transforms"])[0]["config"] == {"field": "v"}
    assert result.warnings == [f"transforms.x.feild: not an option of {KAFKA}HoistField$Value: ignored, as Kafka "
                               "Connect does"]  # fmt: skip


def test_negate_without_a_predicate_is_ignored_with_a_warning() -> None:
    result = translate(
        sink(**{"transforms": "x", "transforms.x.type": f"{KAFKA}Filter", "transforms.x.negate": "true"})
    )
    assert json.loads(result.values["sink.transforms"]) == [{"name": "x", "type": f"{KAFKA}Filter", "config": {}}]
    assert result.warnings == ["transforms.x.negate: no predicate to negate: ignored, as Kafka Connect does"]


def test_keys_of_an_unlisted_transform_are_a_warning() -> None:
    result = translate(sink(**{"transforms.old.type": f"{KAFKA}Filter"}))
    assert "sink.transforms" not in result.values
    assert result.warnings == ["transforms.old.type: old is not listed in transforms: ignored"]


def test_extract_field_with_nested_paths_runs_and_other_transforms_refuse_v2_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # KIP-821: Kafka's releases (3.8 to 4.x) read field.syntax.version=V2 in ExtractField alone.
    keys = {"transforms": "x", "transforms.x.type": f"{KAFKA}ExtractField$Key", "transforms.x.field": "`a.b`.c",
            "transforms.x.field.syntax.version": "V2"}  # fmt: skip
    result = translate(sink(**keys))
    [loaded] = load_env(result.connector.settings, result.env, monkeypatch).sink.transforms
    assert loaded.config == {"field": "`a.b`.c", "field.syntax.version": "V2"}
    replace = {"transforms": "x", "transforms.x.type": f"{KAFKA}ReplaceField$Value", "transforms.x.exclude": "a.b",
               "transforms.x.field.syntax.version": "V2"}  # fmt: skip
    assert "transforms.x.field.syntax.version: V2 (nested field paths) is not supported for ReplaceField" in refusal(
        **replace
    )
