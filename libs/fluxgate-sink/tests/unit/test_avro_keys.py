"""PK _key with Avro record keys (Confluent's AvroConverter), read by the values' decoder through
the registry: primitive keys as their value, a record key's fields by PK _key.<field>, a record key
under PK _key itself, a key that does not decode, and a registry that is away."""

from __future__ import annotations

import asyncio
import io
import json
import struct
from typing import Any

import fastavro
import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError
from fluxgate_testing.sink.memory import FakeDeadLetters, FakeSink, FakeSource, aggregate, record, until

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.errors import RegistryError, SerializationError
from fluxgate_core.serde import AvroDecoder
from fluxgate_core.settings import KafkaSettings, RegistrySettings
from fluxgate_sink import runner as runner_module
from fluxgate_sink.formats import AvroKeys, key_reader
from fluxgate_sink.kcql import parse
from fluxgate_sink.kcql_routing import Router
from fluxgate_sink.runner import SinkRunner
from fluxgate_sink.settings import SinkSettings

SITE = {
    "type": "record",
    "name": "SiteKey",
    "fields": [{"name": "site", "type": "string"}, {"name": "n", "type": "int"}],
}
SCHEMAS: dict[int, Any] = {1: "string", 2: "int", 3: "long", 4: SITE}


class Registry:
    """What AvroDecoder asks of the registry; ``away`` makes it unreachable."""

    def __init__(self) -> None:
        self.away = False
        self.asked: list[int] = []

    def get_schema(self, schema_id: int) -> Any:
        self.asked.append(schema_id)
        if self.away:
            raise ConnectionError("connection refused")
        if schema_id not in SCHEMAS:
            raise SchemaRegistryError(404, 40403, f"Schema {schema_id} not found")
        return type("Registered", (), {"schema_str": json.dumps(SCHEMAS[schema_id])})()


def avro(schema_id: int, datum: Any) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(SCHEMAS[schema_id]), datum)
    return struct.pack(">bI", 0, schema_id) + body.getvalue()


def keys(registry: Registry | None = None) -> AvroKeys:
    return AvroKeys(AvroDecoder(registry or Registry()))  # type: ignore[arg-type]


def keyed(key: bytes | None, offset: int = 5) -> ConsumedRecord:
    return record("t", 0, offset, aggregate("d1", 0))._replace(key=key)


def test_primitive_keys_read_as_their_value_a_record_key_as_its_fields() -> None:
    read = keys().read
    assert read(avro(1, "sensor-7")) == "sensor-7"
    assert read(avro(2, -4)) == -4
    assert read(avro(3, 2**40)) == 2**40
    assert read(avro(4, {"site": "s1", "n": 2})) == {"site": "s1", "n": 2}
    assert read(None) is None


def test_a_key_in_no_wire_format_or_of_an_unknown_schema_does_not_decode() -> None:
    read = keys().read
    with pytest.raises(SerializationError, match="magic byte"):
        read(b"sensor-7")
    with pytest.raises(SerializationError, match="does not match schema id 2"):
        read(struct.pack(">bI", 0, 2))  # an int with no body


def test_avro_keys_need_the_registry() -> None:
    with pytest.raises(ValueError, match="AvroKeys"):
        key_reader("avro", schemas_enable=False)


def test_pk_key_is_a_primitive_avro_key() -> None:
    router = Router(parse("UPSERT INTO i SELECT * FROM t PK _key"), read_key=keys().read)
    routed = router.route([keyed(avro(1, "sensor-7")), keyed(avro(2, 42), 6), keyed(avro(3, 2**40), 7)])
    assert [item.id for item in routed.items] == ["sensor-7", "42", str(2**40)]
    assert "_key" not in routed.items[0].document  # read for the id only


def test_pk_key_fields_of_an_avro_record_key() -> None:
    router = Router(parse("UPSERT INTO i SELECT * FROM t PK _key.site, _key.n"), read_key=keys().read)
    assert [item.id for item in router.route([keyed(avro(4, {"site": "s1", "n": 2}))]).items] == ["s1|2"]


def test_a_record_key_under_pk_key_itself_and_a_key_that_does_not_decode_are_dead_lettered() -> None:
    router = Router(parse("UPSERT INTO i SELECT * FROM t PK _key"), read_key=keys().read)
    routed = router.route([keyed(avro(4, {"site": "s1", "n": 2})), keyed(b"plain", 6), keyed(avro(1, "k"), 7)])
    assert [item.id for item in routed.items] == ["k"]
    whole, plain = routed.undecodable  # always dead-lettered, whatever the policy, as a bad value
    assert whole.offset == 5 and "the record key is a record (fields site, n), not one value" in str(whole.error)
    assert "PK _key.<field>" in str(whole.error)
    assert plain.offset == 6 and str(plain.error).startswith("the record key does not decode: unknown magic byte")


def test_schemas_are_fetched_once_per_id_and_a_registry_away_is_raised_not_swallowed() -> None:
    registry = Registry()
    avro_keys = keys(registry)
    avro_keys.fetch_schemas([avro(1, "a"), avro(1, "b"), None, b"", b"not avro", avro(2, 1)])
    assert registry.asked == [1, 2]
    registry.away = True
    with pytest.raises(RegistryError):
        avro_keys.fetch_schemas([avro(3, 5)])
    avro_keys.fetch_schemas([avro(1, "c")])  # known: no question to the registry


def test_a_key_with_an_id_the_registry_lacks_asks_it_once_then_again_only_off_the_loop() -> None:
    registry, now = Registry(), [0.0]
    avro_keys = AvroKeys(AvroDecoder(registry, unknown_for_s=60, clock=lambda: now[0]))  # type: ignore[arg-type]
    bogus = struct.pack(">bI", 0, 77) + b"\x02a"
    for _ in range(50):  # batch after batch of a producer writing a bogus id
        avro_keys.fetch_schemas([bogus])
        with pytest.raises(SerializationError, match="unknown schema id 77"):
            avro_keys.read(bogus)  # on the loop: never a registry request
    assert registry.asked == [77]
    now[0] = 61  # the 404 is believed a while only; asked again by the fetch, on its thread
    avro_keys.fetch_schemas([bogus])
    assert registry.asked == [77, 77]
    with pytest.raises(SerializationError):
        avro_keys.read(bogus)
    assert registry.asked == [77, 77]


async def test_the_runner_waits_for_the_registry_of_the_keys_and_dead_letters_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = Registry()
    registry.away = True
    monkeypatch.setattr(runner_module.AvroKeys, "of", classmethod(lambda cls, settings: keys(registry)))
    records = [record("aggs", 0, i, aggregate(f"dev-{i}", 0))._replace(key=avro(1, f"k{i}")) for i in range(3)]
    sink, dead = FakeSink(), FakeDeadLetters()
    source: list[FakeSource] = []

    def build(topics: list[str], on_assign: Any, on_revoke: Any) -> FakeSource:
        source.append(FakeSource(records, on_assign, on_revoke))
        return source[0]

    settings = SinkSettings(
        kcql="UPSERT INTO temps SELECT * FROM aggs PK _key", key_format="avro", batch_age_ms=0, outage_backoff_ms=1
    )
    runner = SinkRunner(
        "test", sink, kafka=KafkaSettings(), registry=RegistrySettings(), settings=settings,
        source_factory=build, dead_letters=dead,
    )  # fmt: skip
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    await until(lambda: len(registry.asked) >= 3)  # asked again and again while away
    assert sink.docs["temps"] == {} and dead.sent == [] and source[0].committed(("aggs", 0)) is None
    registry.away = False
    await until(lambda: source[0].committed(("aggs", 0)) == 3)
    stop.set()
    await task
    assert sorted(sink.docs["temps"]) == ["k0", "k1", "k2"] and dead.sent == []


@pytest.mark.parametrize("deletes_by_key", [False, True])
def test_the_keys_schemas_are_read_ahead_where_a_sink_deletes_by_a_tombstones_key(
    monkeypatch: pytest.MonkeyPatch, deletes_by_key: bool
) -> None:
    # A statement that names no key field reads no key, except a tombstone's where the sink deletes
    # by it (scylla.delete_statement): its schema is then fetched ahead too, so a registry away is
    # waited for instead of dead-lettering the delete.
    monkeypatch.setattr(runner_module.AvroKeys, "of", classmethod(lambda cls, settings: keys(Registry())))
    sink = FakeSink()
    sink.reads_tombstone_keys = deletes_by_key
    settings = SinkSettings(kcql="UPSERT INTO temps SELECT * FROM aggs", key_format="avro")
    runner = SinkRunner("test", sink, kafka=KafkaSettings(), registry=RegistrySettings(), settings=settings)
    assert (runner._avro_keys is not None) is deletes_by_key
