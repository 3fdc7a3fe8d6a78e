from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest
from hazelcast.core import HazelcastJsonValue
from hazelcast.protocol.codec import ringbuffer_add_all_codec as add_all_codec
from hazelcast.proxy.ringbuffer import OVERFLOW_POLICY_FAIL, OVERFLOW_POLICY_OVERWRITE
from hazelcast_store import START, aggregate, client_serialization, item, read_json, statement
from hypothesis import given
from hypothesis import strategies as st

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings
from fluxgate_hazelcast_persister import values as values_module
from fluxgate_hazelcast_persister.settings import DEFAULT_KCQL, ConnectionSettings, HazelcastSettings
from fluxgate_hazelcast_persister.sink import _groups, _record_keys, _record_keys_each
from fluxgate_hazelcast_persister.structures import Structure, structure_of, ttl_seconds
from fluxgate_hazelcast_persister.values import add_all_json_request, json_bytes, json_data, json_documents, to_json
from fluxgate_hazelcast_persister.written_offsets import already_written, written_through, written_through_each
from fluxgate_sink.errors import FieldMissing, KcqlError
from fluxgate_sink.kcql import parse


def test_defaults_work_with_the_local_stack() -> None:
    settings = load_settings(HazelcastSettings)
    assert settings.http.port == 9106 and settings.sink.kcql == DEFAULT_KCQL
    assert settings.hazelcast.client_options()["cluster_members"] == ["127.0.0.1:5701"]
    assert settings.group_id() == "fluxgate-hazelcast-persister"


def test_the_seed_statement_without_storeas_is_a_ringbuffer() -> None:
    (seed,) = parse(
        "INSERT INTO sensor_ringbuffer SELECT sensor_id, timestamp, temperature FROM coap_sensor_topic WITH FORMAT JSON"
    )
    assert structure_of(seed) is Structure.RING_BUFFER and seed.format == "JSON"


@pytest.mark.parametrize(
    ("kcql", "why"),
    [
        ("INSERT INTO x SELECT * FROM t STOREAS CACHE", "not a Hazelcast structure"),
        ("INSERT INTO x SELECT * FROM t STOREAS QUEUE TTL=5", "TTL applies to STOREAS IMAP only"),
        ("INSERT INTO x SELECT a FROM t STOREAS IMAP WITHFORMAT AVRO", "needs SELECT *"),
    ],
)
def test_what_hazelcast_cannot_do_fails_naming_the_variable(clean_env: pytest.MonkeyPatch, kcql: str, why: str) -> None:
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", kcql)
    with pytest.raises(ConfigError, match="FLUXGATE_HZ_SINK__KCQL") as raised:
        load_settings(HazelcastSettings)
    assert why in str(raised.value)


@pytest.mark.parametrize("value_format", ["json", "string"])
def test_avro_pass_through_needs_avro_values(clean_env: pytest.MonkeyPatch, value_format: str) -> None:
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO x SELECT * FROM t STOREAS QUEUE WITHFORMAT AVRO")
    clean_env.setenv("FLUXGATE_HZ_SINK__VALUE_FORMAT", value_format)
    with pytest.raises(ConfigError, match="FLUXGATE_HZ_SINK") as raised:
        load_settings(HazelcastSettings)
    assert f"values are {value_format} (sink.value_format): use WITHFORMAT JSON" in str(raised.value)
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO x SELECT * FROM t STOREAS QUEUE WITHFORMAT JSON")
    assert load_settings(HazelcastSettings).sink.value_format == value_format


def test_credentials_go_together(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_HZ_HAZELCAST__USERNAME", "writer")
    with pytest.raises(ConfigError, match="FLUXGATE_HZ_HAZELCAST"):
        load_settings(HazelcastSettings)


def test_json_has_iso_datetimes_and_refuses_nan() -> None:
    assert to_json({"window_start": START, "n": 1}) == '{"window_start":"2026-11-23T12:00:00+00:00","n":1}'
    with pytest.raises(FieldMissing, match="mean is NaN or infinite"):
        to_json({"mean": float("nan")})
    with pytest.raises(FieldMissing, match=r"tags\.x\[1\] is NaN or infinite"):
        to_json({"tags": {"x": [1.0, float("-inf")]}})


@pytest.mark.parametrize("text", ['{"unit":"Cel","mean":21.5}', '{"text":"Grad °C ✓"}', "{}", "x" * 70_000])
def test_json_values_are_serialized_as_the_client_would(text: str) -> None:
    """The sink hands the client ready-made Data: byte for byte what the client's own
    serialization of a HazelcastJsonValue gives, so readers get the same values; and, as
    Stream-Reactor stores them, of a str (a java.lang.String to a Java reader)."""
    serialization = client_serialization()
    assert json_data(text.encode()).buffer == serialization.to_data(HazelcastJsonValue(text)).buffer
    assert json_data(text.encode(), as_string=True).buffer == serialization.to_data(text).buffer
    assert serialization.to_object(json_data(text.encode(), as_string=True)) == text
    assert "is_big_endian" not in ConnectionSettings().client_options()  # the byte order json_data assumes


def test_a_serialized_document_reads_back_as_its_json() -> None:
    document = {"window_start": START, "mean": 21.5, "unit": "Cel"}
    assert read_json(json_data(json_bytes(document))) == {**document, "window_start": START.isoformat()}


def test_json_of_every_avro_value() -> None:
    """What fastavro hands out: naive datetimes are UTC, decimals keep their digits, bytes are base64
    (as Kafka Connect's JsonConverter writes them)."""
    document = {
        "at": datetime(2026, 11, 23, 12, 0, 0, 123000),
        "day": date(2026, 11, 23),
        "price": Decimal("12.30"),
        "raw": b"\x01\xff",
        "text": "Grad °C",
        "none": None,
        "nested": {"list": [1, 2.5, True]},
    }
    assert to_json(document) == (
        '{"at":"2026-11-23T12:00:00.123000+00:00","day":"2026-11-23","price":"12.30","raw":"Af8=",'
        '"text":"Grad °C","none":null,"nested":{"list":[1,2.5,true]}}'
    )
    with pytest.raises(FieldMissing, match="no JSON form"):
        to_json({"what": object()})


def test_the_record_covers_the_written_prefix_below_a_refusal() -> None:
    keys, offsets = ["a", "a", "b", "a"], [5, 6, 9, 7]
    assert written_through(keys, offsets, 3) == {"a": 6, "b": 9}
    assert written_through(keys, offsets, 4, refused={"a": 6}) == {"a": 5, "b": 9}
    assert already_written(6, "a", {"a": 6}) and not already_written(7, "a", {"a": 6})
    assert not already_written(0, "c", {})


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(-2, 30)), max_size=12),
    st.integers(0, 14),
    st.dictionaries(st.sampled_from("abc"), st.integers(0, 30), max_size=2),
    st.booleans(),
)
def test_the_in_order_shortcut_records_what_the_item_by_item_path_does(
    entries: list[tuple[str, int]], written: int, refused: dict[str, int], in_order: bool
) -> None:
    """A runner's batch (offsets in order, nothing refused) takes a shortcut; any batch must
    get the same record from it as from the general path."""
    if in_order:
        entries = sorted(entries, key=lambda entry: entry[1])
    keys, offsets = [k for k, _ in entries], [o for _, o in entries]
    for cap in ({}, refused):
        assert written_through(keys, offsets, written, cap) == written_through_each(keys, offsets, written, cap)


def test_a_batch_groups_by_structure_and_target_in_batch_order() -> None:
    """Runs of one statement and target are grouped at once; two statements writing one target
    share its group, in batch order, whatever runs they come in."""
    one, other = statement("rb"), statement("rb", extra="PROPERTIES('ringbuffer.overflow'='FAIL')")
    queue = statement("rb", store_as="QUEUE")
    batch = [item(s, aggregate(0, n), n) for n, s in enumerate([one, one, other, queue, one, other])]
    assert [(g.structure, g.target, g.indices) for g in _groups(batch)] == [
        (Structure.RING_BUFFER, "rb", [0, 1, 2, 4, 5]),
        (Structure.QUEUE, "rb", [3]),
    ]


@pytest.mark.parametrize("as_string", [False, True])
@pytest.mark.parametrize("count", [1, 3, 1000])
@pytest.mark.parametrize("policy", [OVERFLOW_POLICY_OVERWRITE, OVERFLOW_POLICY_FAIL])
def test_the_ringbuffer_request_is_the_one_the_client_would_send(count: int, policy: int, as_string: bool) -> None:
    """The sink frames a ringbuffer's JSON values itself: the request must be byte for byte the
    client's own ``add_all`` request of the same values (HazelcastJsonValues, or strs as
    Stream-Reactor stores them), whatever their sizes."""
    documents = [json_bytes(aggregate(n, n, unit="°C" * (n % 7))) for n in range(count)]
    ours = add_all_json_request("temperature_aggregates", documents, policy, as_string)
    texts = [d.decode() for d in documents]
    values = [client_serialization().to_data(t if as_string else HazelcastJsonValue(t)) for t in texts]
    theirs = add_all_codec.encode_request("temperature_aggregates", values, policy)
    assert bytes(ours.buf) == bytes(theirs.buf)
    assert (ours.retryable, ours.contains_data) == (theirs.retryable, theirs.contains_data)


def test_a_client_framing_the_request_otherwise_gets_its_own_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a client version end its add_all request otherwise (a frame after the list),
    the sink sends what that client's codec makes, not a request with its frames misplaced."""

    class OtherCodec:
        decode_response = add_all_codec.decode_response

        @staticmethod
        def encode_request(name: str, values: list[object], policy: int) -> object:
            request = add_all_codec.encode_request(name, values, policy)
            request.buf += b"\x06\x00\x00\x00\x00\x00"  # one more (empty) frame
            return request

    monkeypatch.setattr(values_module, "add_all_codec", OtherCodec)
    documents = [json_bytes(aggregate(n, n)) for n in range(3)]
    ours = add_all_json_request("rb", documents, OVERFLOW_POLICY_OVERWRITE)
    data = [client_serialization().to_data(HazelcastJsonValue(d.decode())) for d in documents]
    assert bytes(ours.buf) == bytes(OtherCodec.encode_request("rb", data, OVERFLOW_POLICY_OVERWRITE).buf)  # type: ignore[attr-defined]


@pytest.mark.parametrize("partitions", [[0], [0, 0, 0], [1, 0, 1], [2, 2, 3, 2]])
def test_offset_record_keys_of_one_partition_match_the_general_path(partitions: list[int]) -> None:
    """One key for a batch of one partition (the shortcut), one per partition otherwise."""
    rb = statement("rb")
    batch = [item(rb, aggregate(n, n), 10 + n, partition=p) for n, p in enumerate(partitions)]
    (group,) = _groups(batch)
    keys = _record_keys(group, batch)
    assert keys == _record_keys_each(group, batch)
    assert [keys[i] for i in group.indices] == [f"RING_BUFFER:rb|temperatures.aggregated|{p}" for p in partitions]


@pytest.mark.parametrize("bad", [[], [1], [0, 3]])
def test_encoding_a_group_at_once_matches_item_by_item(bad: list[int]) -> None:
    """Values and refusals are the same whether the group encodes at once (every value has a
    JSON form) or falls back to item by item (some are NaN)."""
    rb = statement("rb")
    batch = [item(rb, aggregate(n, n, mean=float("nan") if n in bad else 1.5), n) for n in range(4)]
    (fast,), (each,) = _groups(batch), _groups(batch)
    fast.encode(batch)
    each.encode_each(batch)
    assert fast.indices == each.indices == [n for n in range(4) if n not in bad]
    assert fast.values == each.values == [json_bytes(batch[n].document) for n in fast.indices]
    assert [(f.index, str(f.error)) for f in fast.refused] == [(f.index, str(f.error)) for f in each.refused]
    assert [f.index for f in fast.refused] == bad


@pytest.mark.parametrize(
    "documents",
    [
        [],
        [{"mean": 1.5}, {"unit": None}, {"at": START, "raw": b"\x01", "price": Decimal("1.10")}],
        [{"tags": {"x": [None, 2.0]}}, {"n": 1}],
    ],
)
def test_documents_encoded_at_once_are_each_ones_json(documents: list[dict[str, object]]) -> None:
    assert json_documents(documents) == [json_bytes(document) for document in documents]


@pytest.mark.parametrize("bad", [{"mean": float("nan"), "unit": None}, {"what": object()}, {"x": [None, float("inf")]}])
def test_documents_encoded_at_once_refuse_what_one_by_one_refuses(bad: dict[str, object]) -> None:
    with pytest.raises(FieldMissing):
        json_bytes(bad)
    with pytest.raises(FieldMissing, match="no JSON form"):
        json_documents([{"unit": None}, bad, {"n": 1}])


def test_a_ringbuffer_is_written_apart_from_an_avro_statement_on_the_same_target() -> None:
    """A group holds one format: a JSON ringbuffer's values are framed JSON, an AVRO one's bytes."""
    json_rb, avro_rb = statement("rb"), statement("rb", extra="WITHFORMAT AVRO")
    batch = [item(s, aggregate(0, n), n) for n, s in enumerate([json_rb, avro_rb, json_rb])]
    groups = _groups(batch)
    assert [(g.target, g.framed, g.indices) for g in groups] == [("rb", True, [0, 2]), ("rb", False, [1])]


@pytest.mark.parametrize(
    ("store_as", "fluxgate", "stream_reactor"),
    [
        # HazelCastSinkSettings.scala: TargetType.withName(storedAs.toUpperCase), else RELIABLE_TOPIC.
        ("", Structure.RING_BUFFER, Structure.RELIABLE_TOPIC),
        (" STOREAS MAP", Structure.IMAP, Structure.RELIABLE_TOPIC),
        (" STOREAS RINGBUFFER", Structure.RING_BUFFER, Structure.RELIABLE_TOPIC),
        (" STOREAS imap", Structure.IMAP, Structure.IMAP),
        (" STOREAS Ring_Buffer", Structure.RING_BUFFER, Structure.RING_BUFFER),
        (" STOREAS QUEUE", Structure.QUEUE, Structure.QUEUE),
        (" STOREAS RELIABLE_TOPIC", Structure.RELIABLE_TOPIC, Structure.RELIABLE_TOPIC),
    ],
)
def test_the_structure_in_both_semantics(store_as: str, fluxgate: Structure, stream_reactor: Structure) -> None:
    (stmt,) = parse(f"INSERT INTO x SELECT * FROM t PK a{store_as}")
    assert structure_of(stmt) is fluxgate
    assert structure_of(stmt, "stream-reactor") is stream_reactor


def test_an_unknown_name_is_a_reliable_topic_for_stream_reactor_only() -> None:
    (stmt,) = parse("INSERT INTO x SELECT * FROM t STOREAS CACHE")
    assert structure_of(stmt, "stream-reactor") is Structure.RELIABLE_TOPIC
    with pytest.raises(KcqlError, match="not a Hazelcast structure"):
        structure_of(stmt)


@pytest.mark.parametrize(
    ("ttl", "fluxgate", "stream_reactor"), [(5000, 5000.0, 5.0), (1, 1.0, 0.001), (0, None, None), (None, None, None)]
)
def test_a_ttl_is_seconds_for_us_and_milliseconds_for_stream_reactor(
    ttl: int | None, fluxgate: float | None, stream_reactor: float | None
) -> None:
    (stmt,) = parse("INSERT INTO x SELECT * FROM t PK a STOREAS IMAP" + (f" TTL={ttl}" if ttl is not None else ""))
    assert ttl_seconds(stmt) == fluxgate and ttl_seconds(stmt, "stream-reactor") == stream_reactor


@pytest.mark.parametrize("name", ["SET", "list", "MULTI_MAP", "ICache"])
@pytest.mark.parametrize("semantics", ["fluxgate", "stream-reactor"])
def test_structures_we_cannot_write_are_refused_naming_the_alternative(
    clean_env: pytest.MonkeyPatch, name: str, semantics: str
) -> None:
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", f"INSERT INTO x SELECT * FROM t PK a STOREAS {name}")
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", semantics)
    with pytest.raises(ConfigError, match=r"FLUXGATE_HZ_SINK__KCQL.*is not supported: use STOREAS"):
        load_settings(HazelcastSettings)


def test_stream_reactor_accepts_a_ttl_off_a_map_which_it_ignores(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO x SELECT * FROM t TTL=5")
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", "stream-reactor")
    settings = load_settings(HazelcastSettings)
    (stmt,) = parse(settings.sink.kcql)
    assert structure_of(stmt, settings.sink.semantics) is Structure.RELIABLE_TOPIC
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", "fluxgate")
    with pytest.raises(ConfigError, match="TTL applies to STOREAS IMAP only"):
        load_settings(HazelcastSettings)


@pytest.mark.parametrize("semantics", ["fluxgate", "stream-reactor"])
def test_a_ttl_of_zero_is_no_ttl_on_any_structure(clean_env: pytest.MonkeyPatch, semantics: str) -> None:
    # MapWriter.scala puts without a TTL when it is 0; a TTL=0 off a map asks for nothing, so it is no refusal.
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO x SELECT * FROM t STOREAS QUEUE TTL=0")
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", semantics)
    (stmt,) = parse(load_settings(HazelcastSettings).sink.kcql)
    assert stmt.ttl is None and structure_of(stmt, semantics) is Structure.QUEUE  # type: ignore[arg-type]


def test_map_keys_are_stream_reactors_in_its_semantics(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO x SELECT * FROM t PK a, b STOREAS IMAP")
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", "stream-reactor")
    make_key = load_settings(HazelcastSettings).sink.document_ids()
    keyed, unkeyed = parse(
        "INSERT INTO x SELECT * FROM t PK a, b STOREAS IMAP; INSERT INTO y SELECT * FROM u STOREAS IMAP"
    )
    value = {**aggregate(1, 0), "a": "s1", "b": 7}
    # The docs' PK values (Writer.scala's buildPKs joins the PK names, the same key for every record:
    # README, Stream-Reactor semantics), joined by '-'; without a PK buildPKs' topic-partition-offset.
    assert make_key(item(keyed, value, 3, partition=1).source, keyed, value) == "s1-7"
    assert make_key(item(unkeyed, value, 3, partition=1).source, unkeyed, value) == "temperatures.aggregated-1-3"
