import hashlib
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from fluxgate_sink.dates import format_date_pattern
from fluxgate_sink.errors import FieldMissing, KcqlError, SinkError
from fluxgate_sink.kcql import MAX_ID_BYTES, FieldRef, Statement, parse, safe_id, statements_for


def one(text: str) -> Statement:
    [statement] = parse(text)
    return statement


def error(text: str) -> str:
    with pytest.raises(KcqlError) as caught:
        parse(text)
    return str(caught.value)


# ---- the statements Stream-Reactor's docs and users write ----


def test_index_suffix_without_equals_keeps_dash_and_dots() -> None:
    s = one("INSERT INTO temperatures SELECT * FROM temperatures.grouped WITHINDEXSUFFIX -{YYYY.MM.DD}")
    assert (s.mode, s.target, s.topic) == ("INSERT", "temperatures", "temperatures.grouped")
    assert s.fields == (FieldRef((), wildcard=True),)
    assert s.index_suffix == "-{YYYY.MM.DD}"
    assert s.target_for(datetime(2026, 11, 23, 8, tzinfo=UTC)) == "temperatures-2026.11.23"


def test_upsert_with_nested_wildcards_and_nested_pk() -> None:
    s = one("UPSERT INTO indexA SELECT sensor.*, device.* FROM topicA PK device.id")
    assert s.mode == "UPSERT"
    assert s.fields == (FieldRef(("sensor",), wildcard=True), FieldRef(("device",), wildcard=True))
    assert s.pk == (("device", "id"),)


def test_one_topic_two_targets() -> None:
    statements = parse("INSERT INTO indexA SELECT sensor.* FROM topicA; INSERT INTO indexB SELECT device.* FROM topicA")
    assert [(s.target, s.topic, s.fields[0].path) for s in statements] == [
        ("indexA", "topicA", ("sensor",)),
        ("indexB", "topicA", ("device",)),
    ]
    assert [s.text for s in statements] == [
        "INSERT INTO indexA SELECT sensor.* FROM topicA",
        "INSERT INTO indexB SELECT device.* FROM topicA",
    ]


def test_index_suffix_with_equals_and_no_space() -> None:
    s = one("INSERT INTO temperatures SELECT * FROM temperatures.aggregated WITHINDEXSUFFIX={YYYY-MM-dd}")
    assert s.index_suffix == "{YYYY-MM-dd}"
    assert s.target_for(datetime(2026, 3, 4, tzinfo=UTC)) == "temperatures2026-03-04"


def test_with_format_two_words_and_a_field_named_timestamp() -> None:
    s = one(
        "INSERT INTO sensor_ringbuffer SELECT sensor_id, timestamp, temperature FROM coap_sensor_topic WITH FORMAT JSON"
    )
    assert [f.path for f in s.fields] == [("sensor_id",), ("timestamp",), ("temperature",)]
    assert (s.target, s.topic, s.format) == ("sensor_ringbuffer", "coap_sensor_topic", "JSON")


def test_withformat_one_word_then_storeas() -> None:
    s = one("INSERT INTO dev SELECT * FROM coap_sensor_topic WITHFORMAT JSON STOREAS QUEUE")
    assert (s.format, s.store_as) == ("JSON", "QUEUE")


# ---- the rest of the grammar ----


def test_every_clause_in_any_order_lower_case_keywords() -> None:
    s = one(
        "upsert into `my-index` select a.b as x, c from `my-topic.v1`"
        " properties('event.time.field'='ts', retries=3) ttl = 60 storeas ring_buffer withformat avro"
        " batch=500 autocreate pk c ignore a.b withindexsuffix _{yyyy}"
    )
    assert (s.target, s.topic) == ("my-index", "my-topic.v1")
    assert s.fields == (FieldRef(("a", "b"), "x"), FieldRef(("c",)))
    assert (s.ttl, s.store_as, s.format, s.batch_size, s.autocreate) == (60, "RING_BUFFER", "AVRO", 500, True)
    assert (s.pk, s.ignore, s.index_suffix) == ((("c",),), (("a", "b"),), "_{yyyy}")
    assert dict(s.properties) == {"event.time.field": "ts", "retries": "3"}


def test_defaults_when_no_clause() -> None:
    s = one("INSERT INTO t SELECT a FROM x")
    assert (s.ignore, s.pk, s.autocreate, s.batch_size, s.index_suffix) == ((), (), False, None, None)
    assert (s.store_as, s.format, s.ttl, dict(s.properties)) == (None, None, None, {})
    assert s.target_for(datetime(2026, 1, 1, tzinfo=UTC)) == "t"


def test_fields_may_be_named_like_keywords() -> None:
    s = one("INSERT INTO t SELECT from, batch, ttl, pk AS key, timestamp FROM x PK pk, batch IGNORE ttl")
    assert [f.alias or f.path[-1] for f in s.fields] == ["from", "batch", "ttl", "key", "timestamp"]
    assert s.pk == (("pk",), ("batch",))


def test_newlines_trailing_and_empty_statements() -> None:
    statements = parse("\n  INSERT INTO a\n    SELECT *\n    FROM t1;\n;\nUPSERT INTO b SELECT * FROM t2;\n")
    assert [s.target for s in statements] == ["a", "b"]
    assert statements[0].text == "INSERT INTO a\n    SELECT *\n    FROM t1"


def test_statement_is_frozen_and_hashable() -> None:
    s = one("INSERT INTO t SELECT * FROM x PROPERTIES(a=1)")
    with pytest.raises(FrozenInstanceError):
        s.target = "u"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.properties["a"] = "2"  # type: ignore[index]
    assert hash(s) == hash(one("INSERT INTO t SELECT * FROM x PROPERTIES(a=1)"))


def test_statements_for_keeps_order() -> None:
    statements = parse("INSERT INTO a SELECT * FROM t1; INSERT INTO b SELECT * FROM t2; INSERT INTO c SELECT * FROM t1")
    assert [s.target for s in statements_for(statements, "t1")] == ["a", "c"]
    assert statements_for(statements, "t3") == []


# ---- syntax errors: where, the line, a caret, and what was expected ----


def test_misspelt_from() -> None:
    assert error("INSERT INTO t SELECT a FORM x") == (
        "KCQL line 1, column 24: expected FROM, AS, '.' or ',', found 'FORM'\n"
        "    INSERT INTO t SELECT a FORM x\n"
        "                           ^"
    )


def test_error_on_a_later_line_points_at_it() -> None:
    message = error("INSERT INTO a SELECT * FROM t;\nINSERT INTO b SELECT * FROM t BACH=5")
    assert message.startswith("KCQL line 2, column 31: expected a clause (IGNORE, PK, AUTOCREATE, BATCH,")
    assert "found 'BACH'" in message
    assert message.endswith("\n    INSERT INTO b SELECT * FROM t BACH=5\n                                  ^")


def test_missing_topic_at_end_of_input() -> None:
    message = error("INSERT INTO t\n  SELECT a\n  FROM\n")
    assert message.startswith("KCQL line 3, column 7: expected a topic or target name, found the end of the input")


def test_missing_into() -> None:
    assert "expected INTO, found 't'" in error("INSERT t SELECT * FROM x")


def test_no_mode() -> None:
    assert "column 1: expected INSERT, UPSERT, ';' or the end of the input, found 'SELECT'" in error("SELECT * FROM x")


def test_keyword_prefix_is_not_a_keyword() -> None:
    assert "found 'WITHX'" in error("INSERT INTO t SELECT a FROM x WITHX JSON")


def test_with_without_format() -> None:
    assert "expected FORMAT, found 'JSON'" in error("INSERT INTO t SELECT a FROM x WITH JSON")


def test_stray_character() -> None:
    assert "found '~'" in error("INSERT INTO t SELECT a FROM x ~")


def test_empty_select() -> None:
    assert "expected a field name or '*', found ','" in error("INSERT INTO t SELECT , a FROM x")
    # a field may be called "from", so this one reads as SELECT from, then misses its FROM
    assert "column 27: expected FROM, AS, '.' or ',', found 'x'" in error("INSERT INTO t SELECT FROM x")


def test_alias_on_wildcard() -> None:
    assert "expected FROM or ',', found 'AS'" in error("INSERT INTO t SELECT a.* AS b FROM x")


def test_unclosed_properties() -> None:
    assert "expected ',' or ')', found the end of the input" in error("INSERT INTO t SELECT * FROM x PROPERTIES(a=1")


def test_batch_without_equals() -> None:
    assert "expected '=', found '5'" in error("INSERT INTO t SELECT * FROM x BATCH 5")


# ---- semantic errors ----


@pytest.mark.parametrize("text", ["", "   \n ", ";;\n;"])
def test_empty_input(text: str) -> None:
    assert error(text).startswith("KCQL is empty: expected a statement such as INSERT INTO")


def test_unknown_format() -> None:
    assert error("INSERT INTO t SELECT a FROM x WITHFORMAT XML") == (
        "KCQL line 1, column 42: unknown format 'XML'; expected JSON or AVRO\n"
        "    INSERT INTO t SELECT a FROM x WITHFORMAT XML\n"
        "                                             ^"
    )


@pytest.mark.parametrize(
    ("clause", "value"), [("BATCH", "0"), ("BATCH", "-5"), ("TTL", "-1"), ("TTL", "abc"), ("TTL", "1.5")]
)
def test_batch_and_ttl_must_be_positive_integers(clause: str, value: str) -> None:
    assert f"{clause} must be a positive integer, not '{value}'" in error(
        f"INSERT INTO t SELECT * FROM x {clause}={value}"
    )


def test_ttl_zero_is_no_ttl_as_if_absent() -> None:
    # Stream-Reactor's sinks write a TTL of 0 as none (CassandraJsonWriter.scala, MapWriter.scala).
    absent = one("INSERT INTO t SELECT * FROM x STOREAS IMAP")
    for text in ("TTL=0", "TTL = 0", "ttl=00"):
        zero = one(f"INSERT INTO t SELECT * FROM x STOREAS IMAP {text}")
        assert zero.ttl is None and zero == replace(absent, text=zero.text)


def test_repeated_clause() -> None:
    message = error("INSERT INTO t SELECT a FROM x BATCH=1 AUTOCREATE BATCH = 2")
    assert message.startswith("KCQL line 1, column 50: BATCH given twice; each clause may appear once")


def test_pk_on_a_field_not_selected() -> None:
    assert error("INSERT INTO t SELECT a, b.c FROM x PK b.d") == (
        "KCQL line 1, column 39: PK b.d names a field the statement does not select (SELECT a, b.c)\n"
        "    INSERT INTO t SELECT a, b.c FROM x PK b.d\n"
        "                                          ^"
    )


def test_ignore_on_a_field_not_selected() -> None:
    assert "IGNORE c names a field the statement does not select (SELECT a, d.*)" in error(
        "INSERT INTO t SELECT a, d.* FROM x IGNORE a.b, d.e, c"
    )


def test_pk_on_the_parent_of_a_wildcard_is_not_selected() -> None:
    assert "PK a names a field" in error("INSERT INTO t SELECT a.* FROM x PK a")


def test_pk_anywhere_under_select_star() -> None:
    assert one("INSERT INTO t SELECT * FROM x PK a.b.c, d").pk == (("a", "b", "c"), ("d",))


@pytest.mark.parametrize(
    ("suffix", "column", "why"),
    [
        ("-{YYYY.MM.DD", 48, "unbalanced '{'"),
        ("-YYYY}", 52, "unbalanced '}'"),
        ("_{YYYY.QQ}", 54, "unknown date field 'QQ'"),
        ("_{yy}", 49, "unknown date field 'yy'"),
        ("{}", 47, "empty {}"),
    ],
)
def test_bad_index_suffix(suffix: str, column: int, why: str) -> None:
    message = error(f"INSERT INTO t SELECT a FROM x WITHINDEXSUFFIX {suffix}")
    assert message.startswith(f"KCQL line 1, column {column}: WITHINDEXSUFFIX {suffix}: {why}")
    assert message.endswith(" " * (column - 1) + "^")


def test_duplicate_property() -> None:
    assert "property 'a' given twice" in error("INSERT INTO t SELECT * FROM x PROPERTIES(a=1, 'a'='2')")


def test_two_fields_with_the_same_output_name() -> None:
    assert "column 25: a second field named 'a'; give it an alias" in error("INSERT INTO t SELECT a, b.a FROM x")
    assert one("INSERT INTO t SELECT a, b.a AS ba FROM x").fields[1].alias == "ba"


def test_kcql_error_is_a_config_error() -> None:
    from fluxgate_core.errors import ConfigError

    with pytest.raises(ConfigError):
        parse("nonsense")


# ---- date patterns mean what their writers mean ----


@pytest.mark.parametrize(
    ("pattern", "before", "after"),
    [("-{YYYY.MM.DD}", "-2026.12.31", "-2027.01.01"), ("{YYYY-MM-dd}", "2026-12-31", "2027-01-01")],
)
def test_new_year_lands_in_two_daily_indices(pattern: str, before: str, after: str) -> None:
    s = one(f"INSERT INTO temperatures SELECT * FROM t WITHINDEXSUFFIX {pattern}")
    assert s.target_for(datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC)) == f"temperatures{before}"
    assert s.target_for(datetime(2027, 1, 1, 0, 0, 30, tzinfo=UTC)) == f"temperatures{after}"


def test_calendar_year_not_week_year() -> None:
    assert format_date_pattern("{YYYY.MM.DD}", datetime(2025, 12, 29, 12, tzinfo=UTC)) == "2025.12.29"


def test_day_of_month_not_day_of_year() -> None:
    assert format_date_pattern("{yyyy-MM-DD}", datetime(2026, 2, 1, tzinfo=UTC)) == "2026-02-01"


def test_non_utc_time_is_converted_first() -> None:
    tokyo = timezone(timedelta(hours=9))
    assert format_date_pattern("-{YYYY.MM.DD}", datetime(2027, 1, 1, 8, 0, tzinfo=tokyo)) == "-2026.12.31"


def test_hours_minutes_and_literal_text() -> None:
    when = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert format_date_pattern("_h{HH_mm}%x", when) == "_h07_08%x"


def test_format_date_pattern_rejects_a_bad_pattern() -> None:
    with pytest.raises(KcqlError, match="unknown date field 'Q'"):
        format_date_pattern("{YYYY-Q}", datetime(2026, 1, 1, tzinfo=UTC))


# ---- records: project, event time, document id ----

RECORD = {
    "device_id": "d1",
    "metric": "temperature",
    "window_start": datetime(2026, 11, 23, 8, 0, tzinfo=UTC),
    "sensor": {"id": "s1", "value": 21.5, "raw": {"adc": 812, "gain": 2}},
    "device": {"id": "dev-7", "room": "kitchen"},
}


def test_project_nested_field_and_alias() -> None:
    s = one("INSERT INTO t SELECT sensor.value, sensor.id AS sensor_id, device_id FROM x")
    assert s.project(RECORD) == {"value": 21.5, "sensor_id": "s1", "device_id": "d1"}


def test_project_nested_wildcards_flatten_to_top_level() -> None:
    s = one("UPSERT INTO indexA SELECT sensor.*, device.room FROM topicA")
    assert s.project(RECORD) == {"id": "s1", "value": 21.5, "raw": {"adc": 812, "gain": 2}, "room": "kitchen"}


def test_project_star_with_ignore_of_a_nested_field() -> None:
    s = one("INSERT INTO t SELECT * FROM x IGNORE sensor.raw.gain, device")
    document = s.project(RECORD)
    assert document["sensor"] == {"id": "s1", "value": 21.5, "raw": {"adc": 812}}
    assert "device" not in document
    assert RECORD["sensor"]["raw"] == {"adc": 812, "gain": 2}  # type: ignore[index]


def test_project_ignore_under_a_nested_wildcard() -> None:
    s = one("INSERT INTO t SELECT sensor.* FROM x IGNORE sensor.raw")
    assert s.project(RECORD) == {"id": "s1", "value": 21.5}


def test_project_keeps_datetimes() -> None:
    assert one("INSERT INTO t SELECT window_start FROM x").project(RECORD) == {"window_start": RECORD["window_start"]}


@pytest.mark.parametrize("field", ["humidity", "sensor.missing", "device_id.x", "nothing.*", "device_id.*"])
def test_project_missing_field(field: str) -> None:
    with pytest.raises(FieldMissing) as caught:
        one(f"INSERT INTO t SELECT {field} FROM x").project(RECORD)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, SinkError)
    assert not caught.value.retriable
    assert field.removesuffix(".*") in str(caught.value)


def test_event_time_from_window_start_or_event_time() -> None:
    s = one("INSERT INTO t SELECT * FROM x")
    assert s.event_time_field(RECORD) == "window_start"
    assert s.event_time(RECORD) == datetime(2026, 11, 23, 8, tzinfo=UTC)
    assert s.event_time({"event_time": 1_795_420_800_123}) == datetime(2026, 11, 23, 8, 0, 0, 123000, tzinfo=UTC)


def test_event_time_property_overrides() -> None:
    s = one("INSERT INTO t SELECT * FROM x PROPERTIES('event.time.field'='ts')")
    record = {**RECORD, "ts": datetime(2026, 1, 1, 9, tzinfo=timezone(timedelta(hours=1)))}
    assert s.event_time_field(record) == "ts"
    assert s.event_time(record) == datetime(2026, 1, 1, 8, tzinfo=UTC)
    assert s.event_time(record).tzinfo is UTC


def test_event_time_missing_or_wrong_type() -> None:
    s = one("INSERT INTO t SELECT * FROM x")
    with pytest.raises(FieldMissing, match="no event time"):
        s.event_time({"device_id": "d1"})
    with pytest.raises(FieldMissing, match="not a datetime or epoch milliseconds"):
        s.event_time({"event_time": "yesterday"})


def test_document_id_default_pk_is_device_metric_and_event_time_millis() -> None:
    s = one("INSERT INTO t SELECT * FROM x")
    assert s.document_id(RECORD) == "d1|temperature|1795420800000"
    as_millis = {**RECORD, "window_start": 1_795_420_800_000}
    assert s.document_id(as_millis) == s.document_id(RECORD)


def test_document_id_explicit_nested_pk_reads_the_original_record() -> None:
    s = one("UPSERT INTO indexA SELECT sensor.value AS v, device.* FROM topicA PK device.id, sensor.value")
    assert s.document_id(RECORD) == "dev-7|21.5"


def test_document_id_missing_or_null_pk_field() -> None:
    s = one("INSERT INTO t SELECT * FROM x PK device.serial")
    with pytest.raises(FieldMissing, match=r"device\.serial"):
        s.document_id(RECORD)
    with pytest.raises(FieldMissing, match="metric"):
        one("INSERT INTO t SELECT * FROM x").document_id({**RECORD, "metric": None})


@pytest.mark.parametrize("device", ["温" * 256, "😀" * 128, "a" * 500])
def test_an_id_over_the_stores_limit_is_hashed_the_same_every_time(device: str) -> None:
    """Issue 35: 256 characters of a 3-byte script made an id over Elasticsearch's 512-byte
    ``_id``; it becomes its SHA-256, the same on a replay, under every store's limit."""
    s = one("INSERT INTO t SELECT * FROM x")
    record = {**RECORD, "device_id": device}
    joined = f"{device}|temperature|1795420800000"
    made = s.document_id(record)
    assert made == s.document_id(dict(record)) == safe_id(joined)
    assert made == "sha256:" + hashlib.sha256(joined.encode()).hexdigest()


@pytest.mark.parametrize("device", ["d1", "温" * 162, "😀" * 121, "a" * 486])
def test_an_id_within_the_limit_is_kept_as_it_is(device: str) -> None:
    """Every id written before issue 35 keeps its id: a replay upserts the same entries."""
    record = {**RECORD, "device_id": device}
    made = one("INSERT INTO t SELECT * FROM x").document_id(record)
    assert made == f"{device}|temperature|1795420800000" and len(made.encode()) <= MAX_ID_BYTES
