"""The router derives a document id only where the store keys by it, or the statement names a PK."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from fluxgate_testing.sink.memory import aggregate, record

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import SerializationError
from fluxgate_sink.errors import KcqlError, TransformError
from fluxgate_sink.formats import key_reader
from fluxgate_sink.ids import stream_reactor_ids
from fluxgate_sink.kcql import parse
from fluxgate_sink.kcql_routing import Router, Unroutable
from fluxgate_sink.sink import SinkItem

KEYLESS = "INSERT INTO ring SELECT * FROM t"
WITH_PK = "INSERT INTO ring SELECT * FROM t PK device_id"
DEFAULT_ID = f"d1|temperature|{int(aggregate('d1', 0)['window_start'].timestamp() * 1000)}"


@pytest.mark.parametrize(
    ("kcql", "needs_ids", "expected"),
    [
        (KEYLESS, None, DEFAULT_ID),  # the default key fields and the event time
        (KEYLESS, lambda _: True, DEFAULT_ID),
        (KEYLESS, lambda _: False, ""),  # a store that appends: no id
        (WITH_PK, lambda _: False, "d1"),  # a PK is always derived (and checked)
    ],
)
def test_an_id_is_derived_where_it_is_used(kcql: str, needs_ids: object, expected: str) -> None:
    routed = Router(parse(kcql), needs_ids).route([record("t", 0, 5, aggregate("d1", 0))])  # type: ignore[arg-type]
    assert [item.id for item in routed.items] == [expected]
    assert routed.items[0].document["device_id"] == "d1"


def test_a_missing_pk_is_still_unroutable_when_the_store_needs_no_ids() -> None:
    routed = Router(parse(WITH_PK), lambda _: False).route([record("t", 0, 5, {"window_start": 0})])
    assert not routed.items and len(routed.unroutable) == 1


# ---- the batch path: what routing per statement and batch must keep of routing record by record ----

TWO_STATEMENTS = "INSERT INTO a SELECT * FROM t PK device_id; INSERT INTO b SELECT device_id FROM t PK device_id"


def test_items_keep_record_order_across_statements_and_topics() -> None:
    """Items in record order, a record's items in statement order, whatever the runs of topics:
    a sink's written prefix of a group has to mean every offset below it."""
    router = Router(parse(TWO_STATEMENTS + "; INSERT INTO c SELECT * FROM u"))
    records = [
        record("t", 0, 0, aggregate("d0", 0)),
        record("t", 0, 1, aggregate("d1", 0)),
        record("u", 0, 7, aggregate("d2", 0)),
        record("t", 0, 2, None),  # does not decode
        record("t", 0, 3, {"window_start": aggregate("d3", 0)["window_start"]}),  # no PK field: unroutable twice
        record("t", 0, 4, aggregate("d4", 0)),
        record("x", 0, 9, aggregate("d5", 0)),  # a topic no statement reads
    ]
    routed = router.route(records)
    assert [(i.source.offset, i.statement.target) for i in routed.items] == [
        (0, "a"),
        (0, "b"),
        (1, "a"),
        (1, "b"),
        (7, "c"),
        (4, "a"),
        (4, "b"),
    ]
    assert [(u.source.offset, u.statement.target) for u in routed.unroutable] == [(3, "a"), (3, "b")]
    assert [r.offset for r in routed.undecodable] == [2]


def test_select_star_hands_the_record_on_and_a_projection_copies() -> None:
    value = aggregate("d1", 0, extra=1)
    items = Router(parse(TWO_STATEMENTS)).route([record("t", 0, 5, value)]).items
    assert items[0].document is value
    assert items[1].document == {"device_id": "d1"} and "extra" in value  # the record is left as it was


START = aggregate("d1", 0)["window_start"]
MILLIS = int(START.timestamp() * 1000)


@pytest.mark.parametrize(
    ("kcql", "value", "expected"),
    [
        (KEYLESS, {"window_start": START}, START),  # the fast path
        (KEYLESS, {"window_start": MILLIS}, START),  # epoch millis: the general way
        (KEYLESS, {"event_time": START.astimezone(timezone(timedelta(hours=2)))}, START),  # another zone
        (KEYLESS, {"event_time": START, "window_start": START + timedelta(hours=1)}, START + timedelta(hours=1)),
        (KEYLESS + " PROPERTIES('event.time.field'='at')", {"at": START, "window_start": 0}, START),
        (KEYLESS + " PROPERTIES('event.time.field'='m.at')", {"m": {"at": MILLIS}}, START),  # nested
        (KEYLESS, {"device_id": "d1"}, datetime.fromtimestamp(1.5, UTC)),  # none: the Kafka timestamp
    ],
)
def test_the_event_time_is_the_statements_own(kcql: str, value: dict[str, object], expected: datetime) -> None:
    source = record("t", 0, 5, value)._replace(timestamp_ms=1500)
    (item,) = Router(parse(kcql), lambda _: False).route([source]).items
    assert item.event_time == expected and item.event_time.tzinfo is not None


def test_a_dated_target_and_a_missing_event_time_where_one_is_needed() -> None:
    router = Router(parse("INSERT INTO idx SELECT * FROM t WITHINDEXSUFFIX -{YYYY.MM.dd}"))
    routed = router.route([record("t", 0, 1, {"window_start": START}), record("t", 0, 2, {"device_id": "d1"})])
    assert [i.target for i in routed.items] == [f"idx-{START:%Y.%m.%d}"]
    assert [u.source.offset for u in routed.unroutable] == [2]


@pytest.mark.parametrize("bad", [[], [1], [0, 2]])
def test_one_statement_routes_a_batch_at_once_as_record_by_record(bad: list[int]) -> None:
    """A batch where every record routes takes a shortcut; with an unroutable record it goes
    record by record. Either way the items and the unroutable are those of routing each one."""
    router = Router(parse(WITH_PK))
    records = [record("t", 0, n, {"window_start": 0} if n in bad else aggregate(f"d{n}", 0)) for n in range(3)]
    routed = router.route(records)
    each = router._plans["t"][0].route(records)
    assert routed.items == [entry for entry in each if isinstance(entry, SinkItem)]
    assert [(u.source.offset, str(u.error)) for u in routed.unroutable] == [
        (entry.source.offset, str(entry.error)) for entry in each if isinstance(entry, Unroutable)
    ]
    assert [u.source.offset for u in routed.unroutable] == bad


@pytest.mark.parametrize(
    "odd",
    [
        {},
        {1: {"window_start": MILLIS}},  # epoch millis
        {0: {"event_time": START}},  # the first time field missing
        {2: {"window_start": START.astimezone(timezone(timedelta(hours=2)))}},  # another zone
        {1: {"window_start": datetime(2026, 11, 23, 12)}},  # naive
        {0: {"device_id": "d0"}},  # no event time: the Kafka timestamp
    ],
)
def test_whole_records_to_a_fixed_target_route_at_once_as_record_by_record(odd: dict[int, dict[str, object]]) -> None:
    """SELECT * to a fixed target with no id makes a batch's items at once when every record's
    first time field is a UTC datetime; whatever the batch, the items are those of each record."""
    router = Router(parse(KEYLESS), lambda _: False)
    records = [record("t", 0, n, odd.get(n, aggregate(f"d{n}", n))) for n in range(3)]
    plan = router._plans["t"][0]
    assert (plan.whole_items(records) is None) == bool(odd)
    routed = router.route(records)
    assert routed.items == plan.route(records) == [plan.item(r) for r in records]
    assert all(item.event_time.tzinfo is not None and item.id == "" for item in routed.items)


# ---- PK _key: the record key, read as Kafka Connect's StringConverter or JsonConverter reads it ----


def keyed(key: bytes | None, offset: int = 5) -> ConsumedRecord:
    return record("t", 0, offset, aggregate("d1", 0))._replace(key=key)


def test_pk_key_is_the_string_key() -> None:
    routed = Router(parse("UPSERT INTO i SELECT * FROM t PK _key")).route([keyed(b"sensor-7"), keyed(b"\xffx")])
    assert [item.id for item in routed.items] == ["sensor-7", "\ufffdx"]  # as Java's UTF-8 decoder replaces
    assert "_key" not in routed.items[0].document  # read for the id only


def test_pk_key_fields_of_a_json_key_with_or_without_schemas() -> None:
    kcql = parse("UPSERT INTO i SELECT * FROM t PK _key.site, device_id")
    bare = Router(kcql, read_key=key_reader("json", schemas_enable=False)).route([keyed(b'{"site": "s1"}')])
    envelope = b'{"schema": {"type": "struct", "fields": [{"field": "site", "type": "int32"}]}, "payload": {"site": 4}}'
    read = key_reader("json", schemas_enable=True)
    assert [item.id for item in bare.items] == ["s1|d1"]
    assert [item.id for item in Router(kcql, read_key=read).route([keyed(envelope)]).items] == ["4|d1"]


def test_a_key_that_does_not_decode_is_dead_lettered_and_a_null_key_goes_through_the_policy() -> None:
    router = Router(parse("UPSERT INTO i SELECT * FROM t PK _key"), read_key=key_reader("json", schemas_enable=False))
    routed = router.route([keyed(b'{"site": '), keyed(None, offset=6), keyed(b'"k"', offset=7)])
    assert [item.id for item in routed.items] == ["k"]
    [undecodable] = routed.undecodable  # always dead-lettered, as a value that does not decode
    assert undecodable.offset == 5 and str(undecodable.error).startswith("the record key does not decode: not JSON")
    [null_key] = routed.unroutable
    assert null_key.source.offset == 6 and "_key is null" in str(null_key.error)


# ---- string keys parsed as JSON first: Stream-Reactor's Elastic sink (elastic7's JsonPayloadExtractor.scala) ----


def stream_reactor_ids_of(
    keys: list[bytes], kcql: str = "UPSERT INTO i SELECT * FROM t PK _key", **reader: object
) -> list[str]:
    read = key_reader(**reader) if reader else key_reader("string", schemas_enable=False)  # type: ignore[arg-type]
    router = Router(parse(kcql), read_key=read, make_id=stream_reactor_ids(), string_keys="json")
    routed = router.route([keyed(key, offset) for offset, key in enumerate(keys)])
    assert not routed.unroutable and not routed.undecodable
    return [item.id for item in routed.items]


def test_a_string_key_is_parsed_as_json_first_where_the_config_is_stream_reactors() -> None:
    # StringConverter's text: JSON when it parses (1.50 the number 1.5, Double.toString's "1.5"), else the text.
    texts = [b"1.50", b"sensor-7", b"007", b"NaN", b"true", b"12345678901234567890", b"1e3", b' "quoted" ']
    assert stream_reactor_ids_of(texts) == ["1.5", "sensor-7", "007", "NaN", "true", "12345678901234567890",
                                            "1000.0", "quoted"]  # fmt: skip
    # a JSON object in the text is a record key: its fields by PK _key.<field>
    assert stream_reactor_ids_of([b'{"site": 2.50}'], "UPSERT INTO i SELECT * FROM t PK _key.site") == ["2.5"]


def test_a_json_string_key_is_parsed_again_with_or_without_schemas_and_a_number_stays_as_it_is() -> None:
    bare = stream_reactor_ids_of([b'"1.50"', b'"x"', b"1.50"], key_format="json", schemas_enable=False)
    envelope = b'{"schema": {"type": "string"}, "payload": "1.50"}'
    assert bare == ["1.5", "x", "1.5"]
    assert stream_reactor_ids_of([envelope], key_format="json", schemas_enable=True) == ["1.5"]


def test_our_services_keep_a_string_key_as_its_text() -> None:
    routed = Router(parse("UPSERT INTO i SELECT * FROM t PK _key")).route([keyed(b"1.50"), keyed(b'"x"')])
    assert [item.id for item in routed.items] == ["1.50", '"x"']


def test_a_string_key_that_parses_to_a_record_is_refused_by_pk_key_as_stream_reactor_refuses_it() -> None:
    router = Router(parse("UPSERT INTO i SELECT * FROM t PK _key"), make_id=stream_reactor_ids(), string_keys="json")
    [refused] = router.route([keyed(b'{"site": 1}')]).undecodable
    assert "the record key is a record (fields site)" in str(refused.error)


# ---- SELECT _key.<field>, _header.<name>, _value.<field>: record metadata, as Stream-Reactor names it ----
# Kcql.java (exitColumn_name) files `_key.`/`_header.` entries as key and header fields; 10.x's Cassandra
# sink maps them to the key's field and the header's value (CassandraSettings.scala, getTopicMappings).

JSON_KEYS = key_reader("json", schemas_enable=False)
METADATA = "INSERT INTO i SELECT _key.id AS device, _header.source AS src, temperature FROM t"


def metadata_record(key: bytes | None, headers: object = (("source", b"gw-1"),), offset: int = 5) -> ConsumedRecord:
    return record("t", 0, offset, aggregate("d1", 0, temperature=21.5))._replace(key=key, headers=headers)


def test_select_reads_key_fields_and_headers_under_their_aliases() -> None:
    routed = Router(parse(METADATA), read_key=JSON_KEYS).route([metadata_record(b'{"id": "dev-7"}')])
    assert [item.document for item in routed.items] == [{"device": "dev-7", "src": "gw-1", "temperature": 21.5}]


def test_without_an_alias_the_column_is_the_last_name_and_value_prefixed_fields_are_the_values() -> None:
    kcql = "INSERT INTO i SELECT _key.site.id, _header.source, _value.temperature, _key.* FROM t"
    [item] = Router(parse(kcql), read_key=JSON_KEYS).route([metadata_record(b'{"site": {"id": 3}, "n": 1}')]).items
    assert item.document == {"id": 3, "source": "gw-1", "temperature": 21.5, "site": {"id": 3}, "n": 1}


def test_the_last_header_of_a_name_is_read_and_a_null_header_is_null() -> None:
    kcql = "INSERT INTO i SELECT _header.trace, _header.empty FROM t"
    headers = (("trace", b"a-1"), ("empty", None), ("trace", b"a-2"))
    [item] = Router(parse(kcql)).route([metadata_record(b"k", headers)]).items
    assert item.document == {"trace": "a-2", "empty": None}


def test_a_header_is_typed_as_simple_header_converter_types_its_text() -> None:
    # SimpleHeaderConverter.toConnectHeader: Values.parseString of the text (header_values).
    kcql = "INSERT INTO i SELECT _header.n, _header.ok, _header.day, _header.ids, _header.src FROM t"
    headers = (("n", b"42"), ("ok", b"true"), ("day", b"2026-11-23"), ("ids", b"[1, 2.5]"), ("src", b"gw-1"))
    [item] = Router(parse(kcql)).route([metadata_record(b"k", headers)]).items
    assert item.document == {"n": 42, "ok": True, "day": date(2026, 11, 23), "ids": [1.0, 2.5], "src": "gw-1"}


def test_a_header_kafka_connect_types_beyond_python_is_unroutable_naming_it() -> None:
    # Values.parseString reads 24:00 as a Time of a whole day; no datetime.time holds it.
    routed = Router(parse(METADATA), read_key=JSON_KEYS).route(
        [metadata_record(b'{"id": 1}', (("source", b"24:00:00.000Z"),))]
    )
    [unroutable] = routed.unroutable
    assert type(unroutable.error).__name__ == "FieldMissing"
    assert str(unroutable.error).startswith("header source: a time of day of 86400000 ms")


def test_a_header_that_is_not_utf8_is_read_as_simple_header_converter_reads_it() -> None:
    # SimpleHeaderConverter.toConnectHeader: new String(bytes, UTF_8), which replaces a malformed sequence.
    [item] = (
        Router(parse(METADATA), read_key=JSON_KEYS)
        .route([metadata_record(b'{"id": 1}', (("source", b"\xffgw"),))])
        .items
    )
    assert item.document["src"] == "\ufffdgw"


def test_a_missing_header_or_key_field_is_unroutable_as_a_missing_value_field() -> None:
    router = Router(parse(METADATA), read_key=JSON_KEYS)
    records = [
        metadata_record(b'{"id": "a"}', headers=(("other", b"x"),)),
        metadata_record(b'{"site": 1}', offset=6),  # a key without the field
        metadata_record(b'"text"', offset=7),  # a key of one value: it has no fields
        metadata_record(None, offset=8),  # no key
    ]
    routed = router.route(records)
    assert not routed.items and not routed.undecodable
    assert [(u.source.offset, type(u.error).__name__) for u in routed.unroutable] == [
        (5, "FieldMissing"), (6, "FieldMissing"), (7, "FieldMissing"), (8, "FieldMissing"),
    ]  # fmt: skip
    why = [str(u.error) for u in routed.unroutable]
    assert why[0] == "header source is missing"
    assert why[1] == "field _key.id is missing: the record key has no id"
    assert "the record key is one value (str), not a record, so _key.id selects nothing" in why[2]
    assert why[3] == "the record key is null, so _key.id selects nothing"


def test_a_key_that_does_not_decode_is_dead_lettered_with_the_reason() -> None:
    routed = Router(parse(METADATA), read_key=JSON_KEYS).route([metadata_record(b'{"id": ')])
    [undecodable] = routed.undecodable
    assert not routed.items and str(undecodable.error).startswith("the record key does not decode: not JSON")


class Exploding(tuple):  # type: ignore[type-arg]
    """Headers that fail when read: a statement that does not name a header never reads them."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("headers read")

    def __reversed__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("headers read")


def test_statements_that_name_no_key_field_or_header_read_neither() -> None:
    reads: list[bytes | None] = []

    def read(key: bytes | None) -> object:
        reads.append(key)
        return JSON_KEYS(key)

    kcql = parse("INSERT INTO a SELECT temperature FROM t; INSERT INTO b SELECT _key.id FROM t")
    router = Router(kcql, read_key=read)
    routed = router.route([metadata_record(b'{"id": ', headers=Exploding())])  # a key that does not decode
    assert [(i.statement.target, i.document) for i in routed.items] == [("a", {"temperature": 21.5})]
    assert len(routed.undecodable) == 1 and reads == [b'{"id": ']  # read once, for b only
    assert Router(kcql[:1], read_key=read).reads_keys is False and router.reads_keys is True


def test_select_header_wildcard_is_refused() -> None:
    with pytest.raises(KcqlError, match=r"_header\.\*: name each header"):
        parse("INSERT INTO i SELECT _header.* FROM t")


def tombstone_record(key: bytes | None, offset: int = 5) -> ConsumedRecord:
    """A record without a value, as the consumer hands it over: b"", and its decoding error."""
    value = record("t", 0, offset, aggregate("d1", 0))
    error = SerializationError("the value is null")
    return value._replace(key=key, value=b"", headers=(("source", b"gw-2"),), record=None, error=error)


TOMBSTONES = "INSERT INTO k.t SELECT _key.id AS device, temperature, _header.source AS src FROM t"


def test_a_tombstone_routes_with_null_value_fields_where_every_statement_of_its_topic_takes_tombstones() -> None:
    records = [metadata_record(b'{"id": "a"}'), tombstone_record(b'{"id": "a"}', offset=6)]
    router = Router(parse(TOMBSTONES), read_key=JSON_KEYS, tombstones=lambda statement: True)
    routed = router.route(records)
    assert [(item.source.offset, item.document) for item in routed.items] == [
        (5, {"device": "a", "temperature": 21.5, "src": "gw-1"}),
        (6, {"device": "a", "temperature": None, "src": "gw-2"}),  # the key's fields and headers are still read
    ]
    assert not routed.undecodable and not routed.unroutable


def test_a_tombstone_of_a_statement_that_does_not_read_the_key_carries_the_decoded_key() -> None:
    # What a sink deletes by (the older Cassandra sinks' connect.cassandra.delete.*): the key, as
    # the sink's key format reads it, the record's only content.
    records = [metadata_record(b'{"id": "a"}'), tombstone_record(b'{"id": "a"}', offset=6), tombstone_record(None, 7)]
    routed = Router(parse("INSERT INTO k.t SELECT * FROM t"), read_key=JSON_KEYS, tombstones=lambda s: True).route(
        records
    )
    assert [(item.source.offset, item.document.get("_key")) for item in routed.items] == [
        (5, None),  # a record with a value is as it was: no _key
        (6, {"id": "a"}),
        (7, None),  # no key at all
    ]
    assert routed.items[1].document == {"_key": {"id": "a"}}
    broken = tombstone_record(b'{"id": ', offset=8)
    undecodable = Router(parse("INSERT INTO k.t SELECT * FROM t"), read_key=JSON_KEYS, tombstones=lambda s: True)
    assert [r.offset for r in undecodable.route([broken]).undecodable] == [8]  # a key that does not decode


@pytest.mark.parametrize("takes", [None, lambda statement: False, lambda statement: statement.target == "k.t"])
def test_a_tombstone_is_undecodable_unless_every_statement_of_its_topic_takes_it(takes: object) -> None:
    kcql = TOMBSTONES + "; INSERT INTO k.other SELECT _key.id AS device FROM t"
    routed = Router(parse(kcql), read_key=JSON_KEYS, tombstones=takes).route([tombstone_record(b'{"id": "a"}')])  # type: ignore[arg-type]
    assert not routed.items and [r.offset for r in routed.undecodable] == [5]


def test_a_value_a_transform_failed_on_or_one_that_is_not_empty_is_never_a_tombstone() -> None:
    failed = tombstone_record(b'{"id": "a"}')._replace(error=TransformError("transforms.t0: no"))
    garbage = tombstone_record(b'{"id": "a"}', offset=6)._replace(value=b"\x00\x01")
    routed = Router(parse(TOMBSTONES), read_key=JSON_KEYS, tombstones=lambda s: True).route([failed, garbage])
    assert not routed.items and [r.offset for r in routed.undecodable] == [5, 6]


def test_a_tombstone_projects_key_fields_and_lifts_a_key_wildcard_but_no_value_wildcard() -> None:
    [statement] = parse("INSERT INTO k.t SELECT _key.*, *, temperature AS t FROM t")
    assert statement.project(None, {"id": 1, "site": "s"}) == {"id": 1, "site": "s", "t": None}
