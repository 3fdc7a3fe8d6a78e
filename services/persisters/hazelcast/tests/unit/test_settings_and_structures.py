from __future__ import annotations

import os
from datetime import date, datetime
from decimal import Decimal

import pytest
from hazelcast.core import HazelcastJsonValue
from hazelcast_store import START, aggregate, client_serialization, item, read_json, statement

from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings
from fluxgate_hazelcast_persister.offsets import already_written, written_through
from fluxgate_hazelcast_persister.settings import DEFAULT_KCQL, ConnectionSettings, HazelcastSettings
from fluxgate_hazelcast_persister.sink import _groups
from fluxgate_hazelcast_persister.structures import Structure, structure_of
from fluxgate_hazelcast_persister.values import json_bytes, json_data, to_json
from fluxgate_sink.errors import FieldMissing
from fluxgate_sink.kcql import parse


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("FLUXGATE_HZ_"):
            monkeypatch.delenv(name)
    return monkeypatch


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
    serialization of a HazelcastJsonValue gives, so readers get the same values."""
    assert json_data(text.encode()).buffer == client_serialization().to_data(HazelcastJsonValue(text)).buffer
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
