"""Kafka Connect's transforms on decoded records, each as Kafka defines it without a schema, and the
chain's failures: a bad config names its key, a record a transform cannot apply to fails with the reason."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_sink.errors import TransformError
from fluxgate_sink.formats import ConnectJsonDecoder, key_reader
from fluxgate_sink.kcql import parse
from fluxgate_sink.kcql_routing import Router
from fluxgate_sink.metrics import FILTERED
from fluxgate_sink.settings import SinkSettings
from fluxgate_sink.smt import TransformConfigError, cast_value
from fluxgate_sink.transforms import KAFKA, PREDICATES, TransformConfig, Transforms

STAMP_MS = 1_764_115_200_123  # 2025-11-26T00:00:00.123Z


def consumed(value: dict[str, Any] | None, *, key: bytes | None = b"k1", raw: bytes = b"{}", topic: str = "t",
             headers: tuple[tuple[str, bytes | None], ...] = ()) -> ConsumedRecord:  # fmt: skip
    return ConsumedRecord(topic, 2, 41, key, raw, headers, STAMP_MS, value)


def transforms(*steps: dict[str, Any], read_value: Any = None, key_format: str = "string") -> Transforms:
    configs = [TransformConfig.model_validate({"name": f"t{i}", **step}) for i, step in enumerate(steps)]
    return Transforms(configs, key_reader(key_format, schemas_enable=False), read_value)  # type: ignore[arg-type]


def one(value: dict[str, Any] | None, *steps: dict[str, Any], **record: Any) -> ConsumedRecord:
    [out] = transforms(*steps).apply([consumed(value, **record)])
    return out


def value_of(value: Any, cls: str, **config: str) -> Any:
    out = one(value, {"type": f"{KAFKA}{cls}", "config": config})
    assert out.error is None, out.error
    return out.record


def failure(value: Any, cls: str, **config: str) -> str:
    out = one(value, {"type": f"{KAFKA}{cls}", "config": config})
    assert out.record is None and isinstance(out.error, TransformError)
    return str(out.error)


def test_insert_field_adds_the_record_coordinates_and_a_static_value() -> None:
    config = {"topic.field": "topic!", "partition.field": "p", "offset.field": "o?", "timestamp.field": "ts",
              "static.field": "origin", "static.value": "fluxgate"}  # fmt: skip
    assert value_of({"a": 1}, "InsertField$Value", **config) == {
        "a": 1, "topic": "t", "p": 2, "o": 41, "origin": "fluxgate",
        "ts": datetime(2025, 11, 26, 0, 0, 0, 123000, tzinfo=UTC),
    }  # fmt: skip


def test_insert_field_on_the_key_leaves_the_value() -> None:
    chain = transforms({"type": f"{KAFKA}InsertField$Key", "config": {"topic.field": "topic"}}, key_format="json")
    [out] = chain.apply([consumed({"a": 1}, key=b'{"id": 7}')])
    assert out.record == {"a": 1} and out.transformed_key == ({"id": 7, "topic": "t"},)


def test_insert_field_on_a_string_key_fails_naming_the_transform() -> None:
    [out] = transforms({"type": f"{KAFKA}InsertField$Key", "config": {"topic.field": "topic"}}).apply([consumed({})])
    assert "transforms.t0: only a map or struct can be used for field insertion, found str" in str(out.error)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"renames": "a:alpha,b:beta"}, {"alpha": 1, "beta": 2, "c": 3}),
        ({"exclude": "b"}, {"a": 1, "c": 3}),
        ({"include": "a,c", "renames": "c:gamma"}, {"a": 1, "gamma": 3}),
        ({"blacklist": "a,c"}, {"b": 2}),  # the names before Kafka 2.6
        ({"whitelist": "b"}, {"b": 2}),
        ({"include": "a", "whitelist": "b"}, {"a": 1}),  # the new name wins
        ({"exclude": "a", "renames": "a:x"}, {"b": 2, "c": 3}),  # filtered by the original name first
    ],
)
def test_replace_field(config: dict[str, str], expected: dict[str, int]) -> None:
    assert value_of({"a": 1, "b": 2, "c": 3}, "ReplaceField$Value", **config) == expected


def test_replace_field_on_the_key() -> None:
    chain = transforms({"type": f"{KAFKA}ReplaceField$Key", "config": {"renames": "id:device"}}, key_format="json")
    assert chain.apply([consumed({"a": 1}, key=b'{"id": "d1"}')])[0].transformed_key == ({"device": "d1"},)


def test_extract_field_and_hoist_field() -> None:
    assert value_of({"after": {"id": 1}, "op": "c"}, "ExtractField$Value", field="after") == {"id": 1}
    chain = transforms({"type": f"{KAFKA}ExtractField$Key", "config": {"field": "id"}}, key_format="json")
    assert chain.apply([consumed({"a": 1}, key=b'{"id": "d1"}')])[0].transformed_key == ("d1",)
    assert value_of({"a": 1}, "HoistField$Value", field="reading") == {"reading": {"a": 1}}
    hoisted = transforms({"type": f"{KAFKA}HoistField$Key", "config": {"field": "id"}}).apply([consumed({"a": 1})])
    assert hoisted[0].transformed_key == ({"id": "k1"},)


def test_extract_field_to_a_non_object_or_from_a_non_map_fails() -> None:
    assert "after the transforms the value is int, not an object" in failure({"n": 5}, "ExtractField$Value", field="n")
    chain = transforms({"type": f"{KAFKA}ExtractField$Key", "config": {"field": "id"}})
    assert "found str" in str(chain.apply([consumed({"a": 1})])[0].error)


def test_hoist_field_wraps_a_bare_json_value_that_did_not_decode() -> None:
    read = ConnectJsonDecoder(schemas_enable=False).read
    chain = transforms({"type": f"{KAFKA}HoistField$Value", "config": {"field": "v"}}, read_value=read)
    assert chain.apply([consumed(None, raw=b"21.5")])[0].record == {"v": 21.5}


def test_value_to_key_makes_a_map_key_that_pk_key_reads() -> None:
    chain = transforms({"type": f"{KAFKA}ValueToKey", "config": {"fields": "site,device"}})
    [out] = chain.apply([consumed({"site": "s1", "device": "d1", "t": 1})])
    assert out.transformed_key == ({"site": "s1", "device": "d1"},)
    routed = Router(parse("UPSERT INTO i SELECT * FROM t PK _key.site, _key.device")).route([out])
    assert [item.id for item in routed.items] == ["s1|d1"]


@pytest.mark.parametrize(
    ("value", "config", "expected"),
    [
        (STAMP_MS, {"target.type": "Timestamp"}, datetime(2025, 11, 26, 0, 0, 0, 123000, tzinfo=UTC)),
        (STAMP_MS // 1000, {"target.type": "Timestamp", "unix.precision": "seconds"},
         datetime(2025, 11, 26, tzinfo=UTC)),
        (STAMP_MS, {"target.type": "string", "format": "yyyy-MM-dd'T'HH:mm:ss.SSSX"}, "2025-11-26T00:00:00.123Z"),
        (STAMP_MS, {"target.type": "Date"}, date(2025, 11, 26)),
        (STAMP_MS, {"target.type": "Time"}, time(0, 0, 0, 123000)),
        ("26/11/2025 10:15", {"target.type": "unix", "format": "dd/MM/yyyy HH:mm"}, 1_764_152_100_000),
        ("2025-11-26T10:15:00+0100", {"target.type": "unix", "format": "yyyy-MM-dd'T'HH:mm:ssZ"}, 1_764_148_500_000),
        (datetime(2025, 11, 26, tzinfo=UTC), {"target.type": "unix", "unix.precision": "microseconds"},
         1_764_115_200_000_000),
        (date(2025, 11, 26), {"target.type": "string", "format": "yyyyMMdd"}, "20251126"),
        (datetime(1969, 12, 31, 23, 59, 58, 500000, tzinfo=UTC), {"target.type": "unix", "unix.precision": "seconds"},
         -1),  # TimeUnit truncates toward zero
        (-1_500_999, {"target.type": "unix", "unix.precision": "microseconds"}, -1_500_000),
    ],
)  # fmt: skip
def test_timestamp_converter_on_a_field(value: Any, config: dict[str, str], expected: Any) -> None:
    assert value_of({"ts": value, "x": 1}, "TimestampConverter$Value", field="ts", **config) == {"ts": expected, "x": 1}


def test_timestamp_converter_on_the_whole_key_and_its_errors() -> None:
    chain = transforms({"type": f"{KAFKA}TimestampConverter$Key", "config": {"target.type": "Date"}}, key_format="json")
    assert chain.apply([consumed({}, key=str(STAMP_MS).encode())])[0].transformed_key == (date(2025, 11, 26),)
    bad = failure(
        {"ts": "yesterday"}, "TimestampConverter$Value", field="ts", format="yyyy-MM-dd", **{"target.type": "unix"}
    )
    assert "could not parse timestamp: value (yesterday) does not match pattern (yyyy-MM-dd)" in bad
    assert "a list is not a timestamp" in failure(
        {"ts": [1]}, "TimestampConverter$Value", field="ts", **{"target.type": "unix"}
    )


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        (300, "int8", 44),  # Java narrows by wrapping
        (-1.9, "int32", -1),  # truncates a fraction
        (1e20, "int32", 2**31 - 1),  # saturates a double
        ("42", "int16", 42),
        (True, "int64", 1),
        (0.1, "float32", 0.10000000149011612),
        (7, "boolean", True),
        ("TRUE", "boolean", True),
        ("yes", "boolean", False),  # Boolean.parseBoolean
        (1e10, "string", "1.0E10"),  # Double.toString
        (2.5, "string", "2.5"),
        (False, "string", "false"),
        (b"\x01\x02", "string", "AQI="),
        (datetime(2025, 11, 26, 1, 2, 3, 4000, tzinfo=UTC), "string", "2025-11-26T01:02:03.004Z"),
        (datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), "int64", 1000),
        (None, "int32", None),
        (0.5, "boolean", False),  # longValue() != 0
        (" true", "boolean", False),  # parseBoolean does not trim
        (Decimal("300.7"), "int8", 44),  # a BigDecimal truncates, then wraps
        (1e300, "float32", math.inf),
    ],
)
def test_cast_value(value: Any, kind: str, expected: Any) -> None:
    assert cast_value(value, kind) == expected


def test_cast_fields_the_whole_value_and_the_key() -> None:
    assert value_of({"a": "1", "b": 2.7}, "Cast$Value", spec="a:int32,b:int64,c:string") == {"a": 1, "b": 2, "c": None}
    chain = transforms({"type": f"{KAFKA}Cast$Key", "config": {"spec": "int64"}})
    assert chain.apply([consumed({}, key=b"12")])[0].transformed_key == (12,)
    assert "out of range for requested data type int8" in failure({"a": "999"}, "Cast$Value", spec="a:int8")
    assert "cannot cast from a map or struct" in failure({"a": {"x": 1}}, "Cast$Value", spec="a:string")


def test_filter_drops_what_its_predicate_matches_and_counts_it() -> None:
    topic = {"name": "audit", "type": f"{PREDICATES}TopicNameMatches", "config": {"pattern": "audit\\..*"}}
    chain = transforms({"type": f"{KAFKA}Filter", "predicate": topic})
    before = FILTERED.labels("t0")._value.get()
    out = chain.apply([consumed({"a": 1}, topic="audit.x"), consumed({"a": 2}, topic="readings"),
                       consumed({"a": 3}, topic="xaudit.x")])  # fmt: skip
    assert [r.record for r in out] == [{"a": 2}, {"a": 3}]  # the whole name must match
    assert FILTERED.labels("t0")._value.get() == before + 1


def test_negate_keeps_only_what_the_predicate_matches() -> None:
    header = {"name": "h", "type": f"{PREDICATES}HasHeaderKey", "config": {"name": "trace"}}
    chain = transforms({"type": f"{KAFKA}Filter", "predicate": header, "negate": True})
    out = chain.apply([consumed({"a": 1}, headers=(("trace", None),)), consumed({"a": 2})])
    assert [r.record for r in out] == [{"a": 1}]


def test_a_predicate_limits_any_transform_and_tombstones_are_filtered() -> None:
    topic = {"name": "p", "type": f"{PREDICATES}TopicNameMatches", "config": {"pattern": "t"}}
    tombstone = {"name": "dead", "type": f"{PREDICATES}RecordIsTombstone"}
    chain = transforms(
        {"type": f"{KAFKA}Filter", "predicate": tombstone},
        {"type": f"{KAFKA}InsertField$Value", "config": {"static.field": "s", "static.value": "v"}, "predicate": topic},
    )
    out = chain.apply([consumed({"a": 1}), consumed({"a": 2}, topic="u"), consumed(None, raw=b"")])
    assert [r.record for r in out] == [{"a": 1, "s": "v"}, {"a": 2}]


def test_a_record_that_did_not_decode_keeps_its_own_reason() -> None:
    bad = consumed(None, raw=b"not json")._replace(error=TransformError("not JSON"))
    assert transforms({"type": f"{KAFKA}HoistField$Value", "config": {"field": "v"}}).apply([bad]) == [bad]


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"type": "org.apache.kafka.connect.transforms.RegexRouter"},
         "transforms.t0.type: org.apache.kafka.connect.transforms.RegexRouter is not supported; the supported"),
        ({"type": f"{KAFKA}ReplaceField$Value", "config": {"renames": "a"}},
         "transforms.t0.renames: 'a': expected old:new"),
        ({"type": f"{KAFKA}Cast$Value", "config": {"spec": "a:uuid"}}, "transforms.t0.spec: 'a:uuid': cannot cast to"),
        ({"type": f"{KAFKA}Cast$Value", "config": {"spec": "int8,a:int8"}}, "transforms.t0.spec: a type for the whole"),
        ({"type": f"{KAFKA}TimestampConverter$Value", "config": {"target.type": "string"}},
         "transforms.t0.format: required when target.type is string"),
        ({"type": f"{KAFKA}TimestampConverter$Value", "config": {"target.type": "date"}}, "transforms.t0.target.type"),
        ({"type": f"{KAFKA}TimestampConverter$Value", "config": {"target.type": "string", "format": "yyyy-ww"}},
         "transforms.t0.format: pattern letter 'w' is not supported"),
        ({"type": f"{KAFKA}ExtractField$Value", "config": {"field": "`a.b", "field.syntax.version": "V2"}},
         "transforms.t0.field: incomplete backtick pair in path `a.b"),
        ({"type": f"{KAFKA}ExtractField$Value", "config": {"field": "a", "field.syntax.version": "V3"}},
         "transforms.t0.field.syntax.version: 'V3': expected V1 or V2"),
        ({"type": f"{KAFKA}ReplaceField$Value", "config": {"exclude": "a.b", "field.syntax.version": "V2"}},
         "transforms.t0.field.syntax.version: V2 (nested field paths) is not supported for ReplaceField"),
        ({"type": f"{KAFKA}Cast$Value", "config": {"spec": "a.b:int8", "field.syntax.version": "v2"}},
         "transforms.t0.field.syntax.version: V2 (nested field paths) is not supported for Cast"),
        ({"type": f"{KAFKA}ValueToKey", "config": {"fields": "a.b", "field.syntax.version": "V2"}},
         "transforms.t0.field.syntax.version: V2 (nested field paths) is not supported for ValueToKey"),
        ({"type": f"{KAFKA}TimestampConverter$Value",
          "config": {"field": "a.b", "target.type": "unix", "field.syntax.version": "V2"}},
         "transforms.t0.field.syntax.version: V2 (nested field paths) is not supported for TimestampConverter"),
        ({"type": f"{KAFKA}InsertField$Value", "config": {"topic.field": "a.b", "field.syntax.version": "V2"}},
         "transforms.t0.field.syntax.version: V2 (nested field paths) is not supported for InsertField"),
        ({"type": f"{KAFKA}HoistField$Value", "config": {"field": "a.b", "field.syntax.version": "V2"}},
         "transforms.t0.field.syntax.version: V2 (nested field paths) is not supported for HoistField"),
        ({"type": f"{KAFKA}ExtractField$Value", "config": {"feld": "a"}}, "transforms.t0.feld: not an option"),
        ({"type": f"{KAFKA}ValueToKey"}, "transforms.t0.fields: required"),
        ({"type": f"{KAFKA}Filter", "predicate": {"name": "p", "type": f"{PREDICATES}TopicNameMatches",
                                                   "config": {"pattern": "("}}}, "predicates.p.pattern: not a regular"),
        ({"type": f"{KAFKA}Filter", "predicate": {"name": "p", "type": "com.example.IsBig"}},
         "predicates.p.type: com.example.IsBig is not supported"),
        ({"type": f"{KAFKA}Filter", "negate": True}, "transforms.t0.negate: a transform without a predicate"),
    ],
)  # fmt: skip
def test_a_bad_config_names_its_key(step: dict[str, Any], message: str) -> None:
    with pytest.raises(TransformConfigError, match="^" + re.escape(message)):
        transforms(step)


def test_the_sink_settings_refuse_a_bad_chain_naming_the_key() -> None:
    bad = [{"name": "r", "type": "io.confluent.connect.transforms.Drop$Value"}]
    with pytest.raises(ValidationError, match=r"transforms\.r\.type: io\.confluent\.connect\.transforms\.Drop"):
        SinkSettings(kcql="INSERT INTO i SELECT * FROM t", transforms=bad)  # type: ignore[arg-type]


# ---- KIP-821's field.syntax.version=V2: nested paths, which Kafka's released ExtractField reads ----


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("a.b", {"a": {"b": 7}, "b": 1}, 7),
        ("a.b.c", {"a": {"b": {"c": "deep"}}}, "deep"),
        ("`a.b`", {"a.b": 3, "a": {"b": 4}}, 3),  # backticks: a name holding a dot
        ("`a.b`.c", {"a.b": {"c": 5}}, 5),
        ("a.`b.c`", {"a": {"b.c": 6}}, 6),
        ("`a`", {"a": 8}, 8),  # wrapped without a dot: the name inside
        ("a`b", {"a`b": 9}, 9),  # a backtick inside a step is a character
        ("`a\\`.b`.c", {"a`.b": {"c": 10}}, 10),  # an escaped backtick before a dot is part of the name
        ("`a\\`b`.c", {"a\\`b": {"c": 12}}, 12),  # before anything else the backslash stays too
        ("a.", {"a": {"": 11}}, 11),  # a trailing dot: an empty last step
        ("a.x", {"a": {"b": 1}}, None),  # absent: null, as Kafka's valueFrom
        ("a.b", {"a": None}, None),
        ("a.b", {"b": 1}, None),
    ],
)
def test_extract_field_v2_reads_a_nested_path_as_kafkas_single_field_path(path: str, value: Any, expected: Any) -> None:
    assert extracted_key(value, path, "V2") == expected


def extracted_key(key: Any, path: str, version: str | None = None) -> Any:
    """What ExtractField$Key leaves of a JSON key (a key may be any value, a value must stay a record)."""
    config = {"field": path} | ({"field.syntax.version": version} if version else {})
    step = {"type": f"{KAFKA}ExtractField$Key", "config": config}
    [out] = transforms(step, key_format="json").apply([consumed({"v": 1}, key=json.dumps(key).encode())])
    assert out.error is None and out.transformed_key is not None, out.error
    return out.transformed_key[0]


def test_extract_field_v1_takes_a_dotted_name_as_one_field_whatever_the_case_of_the_version() -> None:
    assert extracted_key({"a.b": 1, "a": {"b": 2}}, "a.b") == 1
    assert extracted_key({"a.b": 1, "a": {"b": 2}}, "a.b", "v1") == 1
    assert extracted_key({"a": {"b": 2}}, "a.b", "v2") == 2
    assert value_of({"a": {"b": {"c": 3}}}, "ExtractField$Value", field="a.b", **{"field.syntax.version": "V2"}) == {
        "c": 3
    }


def test_extract_field_v2_through_a_value_that_is_no_map_fails_the_record() -> None:
    message = failure({"a": 5}, "ExtractField$Value", field="a.b", **{"field.syntax.version": "V2"})
    assert "nested field access" in message and "int" in message


def test_extract_field_v2_on_the_key_makes_the_id() -> None:
    step = {"type": f"{KAFKA}ExtractField$Key", "config": {"field": "site.id", "field.syntax.version": "V2"}}
    [out] = transforms(step, key_format="json").apply([consumed({"v": 1}, key=b'{"site": {"id": "s9"}}')])
    routed = Router(parse("UPSERT INTO i SELECT * FROM t PK _key")).route([out])
    assert [item.id for item in routed.items] == ["s9"]


def test_a_tombstone_the_chain_leaves_a_tombstone_stays_one_with_its_transformed_key() -> None:
    # InsertField passes a tombstone unchanged (KAFKA-8523); ValueToKey would fail on it, so the key
    # here is changed by InsertField$Key. The router decides what the tombstone becomes (a delete
    # where the sink takes tombstones, else a dead letter for its own decoding error).
    decoding = TransformError("the value is null")
    tombstone = consumed(None, raw=b"", key=b'{"id": 1}')._replace(error=decoding)
    chain = transforms(
        {"type": f"{KAFKA}InsertField$Value", "config": {"static.field": "s", "static.value": "v"}},
        {"type": f"{KAFKA}InsertField$Key", "config": {"static.field": "k", "static.value": "x"}},
        key_format="json",
    )
    [out] = chain.apply([tombstone])
    assert out.record is None and out.error is decoding
    assert out.transformed_key == ({"id": 1, "k": "x"},)
