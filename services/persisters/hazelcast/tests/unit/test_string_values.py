"""StringConverter values (``sink.value_format=string``, what ``fluxgate connect`` sets from
``value.converter=org.apache.kafka.connect.storage.StringConverter``): stored as Stream-Reactor's
Hazelcast sink stores them, the whole text as one JSON string.

lensesio/stream-reactor, kafka-connect-hazelcast ``writers/Writer.scala``: ``convert`` is
``toJson(record).toString`` for WITHFORMAT JSON (and TEXT); ``toJson`` projects with
kafka-connect-common's ``ConverterUtil.convert``, which hands a value that is not a Struct back as
it is (the projection and IGNORE are not applied), then ``convertValueToJson``:
``SimpleJsonConverter`` makes a STRING value a Jackson ``TextNode``, whose ``toString`` is the
JSON string literal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hazelcast_store import START, client_serialization
from structlog.testing import capture_logs

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings
from fluxgate_hazelcast_persister.app import make_sink
from fluxgate_hazelcast_persister.settings import ConnectionSettings, HazelcastSettings
from fluxgate_hazelcast_persister.sink import HazelcastSink, _groups
from fluxgate_hazelcast_persister.values import text_json
from fluxgate_sink.kcql import Statement, parse
from fluxgate_sink.sink import SinkItem


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        (b'{"a":1}', r'"{\"a\":1}"'),
        # Jackson's escapes: the quote and the backslash, the five short forms, any other control
        # character as \u00XX in upper case (CharTypes' hex digits); nothing else, not / nor DEL.
        (rb'{"a": "x\ny"}', r'"{\"a\": \"x\\ny\"}"'),
        (b"a\tb\nc\rd\x08e\x0cf\x01g\x1f", r'"a\tb\nc\rd\be\ff\u0001g\u001F"'),
        ("é€😀/\x7f\u2028".encode(), '"é€😀/\x7f\u2028"'),
        # StringConverter decodes as Java's new String(bytes, UTF_8): a malformed sequence is U+FFFD.
        (b"\xff{", '"\ufffd{"'),
        (b"", '""'),
        (b'  {"a":1} trailing', r'"  {\"a\":1} trailing"'),
    ],
)
def test_the_text_is_stored_as_stream_reactors_json_string(raw: bytes, stored: str) -> None:
    assert text_json(raw) == stored.encode()
    assert json.loads(stored) == raw.decode("utf-8", "replace")


def _statement(text: str) -> Statement:
    (parsed,) = parse(text)
    return parsed


def _item(stmt: Statement, text: bytes, offset: int) -> SinkItem:
    """The router's item: the consumed bytes, the document read from them (projected), its PK's id."""
    document = json.loads(text)
    source = ConsumedRecord("t", 0, offset, b"k", text, (), 0, document)
    key = "-".join(str(document[path[0]]) for path in stmt.pk)
    return SinkItem(source, stmt, stmt.target, key, stmt.project(document), START)


class _Store:
    """A queue and a map that keep what they are given, and the offset record."""

    name = "q"

    def __init__(self) -> None:
        self.queued: list[Any] = []
        self.entries: dict[str, Any] = {}
        self.offsets: dict[str, int] = {}

    async def add_all(self, values: list[Any]) -> bool:
        self.queued.extend(values)
        return True

    async def get_queue(self, name: str) -> _Store:
        return self

    get_ringbuffer = get_reliable_topic = get_queue  # never called: the batch is a queue's and a map's

    async def get_map(self, name: str) -> Any:
        store = self
        record = name.startswith("fluxgate.offsets.")

        class Map:
            async def get_all(self, keys: list[str]) -> dict[str, int]:
                return {k: v for k, v in store.offsets.items() if k in keys}

            async def put_all(self, entries: dict[str, Any]) -> None:
                (store.offsets if record else store.entries).update(entries)

        return Map()


def _read(value: Any) -> str:
    """A value as Stream-Reactor's semantics store it: a str (a java.lang.String), not a HazelcastJsonValue."""
    stored = client_serialization().to_object(value)
    assert type(stored) is str
    return stored


async def test_a_projection_and_a_pk_leave_the_stored_text_whole() -> None:
    store = _Store()

    async def connect(_: ConnectionSettings) -> _Store:
        return store

    sink = HazelcastSink(ConnectionSettings(), "g", connect, semantics="stream-reactor", text_values=True)
    queue = _statement("INSERT INTO q SELECT * FROM t IGNORE b STOREAS QUEUE")
    imap = _statement("INSERT INTO m SELECT a AS x FROM t PK a STOREAS IMAP")
    with capture_logs() as logs:
        await sink.setup([queue, imap])
    texts = [b'{"a":1,"b":"two"}', b'{"a": 2, "b": [1, 2.50]}']
    batch = [_item(s, text, n) for n, text in enumerate(texts) for s in (queue, imap)]
    assert await sink.write_batch(batch) == []
    assert [_read(v) for v in store.queued] == [json.dumps(t.decode(), ensure_ascii=False) for t in texts]
    assert [json.loads(_read(v)) for v in store.queued] == [t.decode() for t in texts]
    assert {k: json.loads(_read(v)) for k, v in store.entries.items()} == {
        batch[1].id: texts[0].decode(),
        batch[3].id: texts[1].decode(),
    }
    ignored = [entry for entry in logs if entry["event"] == "hazelcast.projection_not_applied"]
    assert [entry["target"] for entry in ignored] == ["q", "m"]


def test_a_ringbuffer_frames_the_text_as_it_frames_json() -> None:
    rb = _statement("INSERT INTO rb SELECT * FROM t STOREAS RING_BUFFER")
    texts = [b'{"a":1}', b'{"a":"\\u00e9"}']
    batch = [_item(rb, text, n) for n, text in enumerate(texts)]
    (group,) = _groups(batch, "stream-reactor", text=True)
    group.encode(batch)
    assert group.framed and group.values == [text_json(t) for t in texts]
    assert not group.refused


def test_make_sink_stores_the_text_for_string_values_only(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO q SELECT * FROM t STOREAS QUEUE")
    assert not make_sink(load_settings(HazelcastSettings)).stores_whole_text
    clean_env.setenv("FLUXGATE_HZ_SINK__VALUE_FORMAT", "json")
    assert not make_sink(load_settings(HazelcastSettings)).stores_whole_text
    clean_env.setenv("FLUXGATE_HZ_SINK__VALUE_FORMAT", "string")
    assert make_sink(load_settings(HazelcastSettings)).stores_whole_text


def test_our_semantics_refuse_a_projection_of_text(clean_env: pytest.MonkeyPatch) -> None:
    """Ours never drop a projection silently; Stream-Reactor's do (a warning at start here)."""
    clean_env.setenv("FLUXGATE_HZ_SINK__VALUE_FORMAT", "string")
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO q SELECT a FROM t STOREAS QUEUE")
    with pytest.raises(ConfigError, match="FLUXGATE_HZ_SINK") as raised:
        load_settings(HazelcastSettings)
    assert "stored whole" in str(raised.value) and "SELECT *" in str(raised.value)
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", "stream-reactor")
    assert load_settings(HazelcastSettings).sink.value_format == "string"


@pytest.mark.parametrize("kind", ["InsertField$Value", "ReplaceField$Value", "HoistField$Value", "Cast$Value"])
def test_a_transform_of_the_value_is_refused_with_text_values(clean_env: pytest.MonkeyPatch, kind: str) -> None:
    """The text is stored as it was consumed: a transform of the value would be dropped silently."""
    options = {"HoistField$Value": {"field": "v"}, "Cast$Value": {"spec": "a:int64"}}.get(kind, {})
    if kind == "InsertField$Value":
        options = {"static.field": "s", "static.value": "x"}
    if kind == "ReplaceField$Value":
        options = {"exclude": "b"}
    chain = [{"name": "t1", "type": f"org.apache.kafka.connect.transforms.{kind}", "config": options}]
    clean_env.setenv("FLUXGATE_HZ_SINK__TRANSFORMS", json.dumps(chain))
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", "stream-reactor")
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO q SELECT * FROM t STOREAS QUEUE")
    assert load_settings(HazelcastSettings).sink.transforms  # with JSON values, it runs
    clean_env.setenv("FLUXGATE_HZ_SINK__VALUE_FORMAT", "string")
    with pytest.raises(ConfigError, match="FLUXGATE_HZ_SINK") as raised:
        load_settings(HazelcastSettings)
    assert f"transforms.t1 ({kind})" in str(raised.value)


def test_transforms_of_the_key_and_filters_run_with_text_values(clean_env: pytest.MonkeyPatch) -> None:
    kafka = "org.apache.kafka.connect.transforms."
    chain = [
        {"name": "k", "type": f"{kafka}ExtractField$Key", "config": {"field": "id"}},
        {"name": "v2k", "type": f"{kafka}ValueToKey", "config": {"fields": "a"}},
        {"name": "f", "type": f"{kafka}Filter", "config": {}},
    ]
    clean_env.setenv("FLUXGATE_HZ_SINK__TRANSFORMS", json.dumps(chain))
    clean_env.setenv("FLUXGATE_HZ_SINK__VALUE_FORMAT", "string")
    clean_env.setenv("FLUXGATE_HZ_SINK__SEMANTICS", "stream-reactor")
    clean_env.setenv("FLUXGATE_HZ_SINK__KCQL", "INSERT INTO q SELECT * FROM t STOREAS QUEUE")
    assert len(load_settings(HazelcastSettings).sink.transforms) == 3
