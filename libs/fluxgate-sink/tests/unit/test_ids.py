"""Document ids: Fluxgate's by default, Stream-Reactor's Elastic sink's when a connector config asks."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from fluxgate_testing.sink.memory import aggregate, record

from fluxgate_sink.ids import fluxgate_id, id_maker, stream_reactor_ids
from fluxgate_sink.kcql import HASHED_ID_PREFIX, MAX_ID_BYTES, parse
from fluxgate_sink.kcql_routing import Router

NOT_OURS = {"sensor": "x", "value": 1}


def ids(kcql: str, values: list[dict[str, Any]], separator: str = "-") -> list[str]:
    routed = Router(parse(kcql), make_id=stream_reactor_ids(separator)).route(
        [record("sensors", 3, 40 + n, value) for n, value in enumerate(values)]
    )
    assert not routed.unroutable, routed.unroutable
    return [item.id for item in routed.items]


def test_without_a_pk_the_id_is_topic_partition_offset() -> None:
    assert ids("INSERT INTO i SELECT * FROM sensors", [NOT_OURS, aggregate("d1", 0)]) == [
        "sensors-3-40",
        "sensors-3-41",  # ours too: no default PK in this mode
    ]


def test_the_separator_joins_the_coordinates_and_the_pk_values() -> None:
    assert ids("INSERT INTO i SELECT * FROM sensors", [NOT_OURS], "::") == ["sensors::3::40"]
    assert ids("INSERT INTO i SELECT * FROM sensors PK sensor, value", [NOT_OURS], "_") == ["x_1"]
    assert ids("INSERT INTO i SELECT * FROM sensors PK sensor, value", [NOT_OURS], "") == ["x1"]


def test_a_nested_pk_is_its_leaf_value() -> None:
    value = {"site": {"id": 7, "room": {"name": "lab"}}, "reading": 1.5}
    kcql = "UPSERT INTO i SELECT * FROM sensors PK site.id, site.room.name"
    assert ids(kcql, [value]) == ["7-lab"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (12, "12"),
        (1.5, "1.5"),
        (1.0, "1.0"),
        (0.001, "0.001"),
        (12_345_678.0, "1.2345678E7"),  # Double.toString: scientific from 10^7
        (1e20, "1.0E20"),
        (-1.5e-5, "-1.5E-5"),
        (Decimal("1.50"), "1.50"),
        (datetime(2026, 11, 26, 10, 0, 5, 123_000, tzinfo=UTC), "Thu Nov 26 10:00:05 UTC 2026"),
        (date(2026, 11, 26), "Thu Nov 26 00:00:00 UTC 2026"),
        (time(10, 30), "Thu Jan 01 10:30:00 UTC 1970"),
    ],
)
def test_a_pk_value_is_written_as_java_writes_it(value: object, text: str) -> None:
    assert ids("INSERT INTO i SELECT * FROM sensors PK v", [{"v": value}]) == [text]


@pytest.mark.parametrize("value", [None, {"a": 1}, [1, 2], b"\x01"])
def test_a_pk_without_one_stable_value_is_unroutable_with_the_reason(value: object) -> None:
    routed = Router(parse("INSERT INTO i SELECT * FROM sensors PK v"), make_id=stream_reactor_ids()).route(
        [record("sensors", 0, 1, {"v": value})]
    )
    assert not routed.items
    (refused,) = routed.unroutable
    assert "key field v" in str(refused.error) and not refused.error.retriable


def test_an_id_over_elasticsearchs_limit_is_hashed_in_both_modes() -> None:
    long = {"v": "x" * (MAX_ID_BYTES + 1)}
    assert ids("INSERT INTO i SELECT * FROM sensors PK v", [long])[0].startswith(HASHED_ID_PREFIX)
    (statement,) = parse("INSERT INTO i SELECT * FROM sensors PK v")
    assert fluxgate_id(record("sensors", 0, 1, long), statement, long).startswith(HASHED_ID_PREFIX)


def test_fluxgate_ids_stay_the_default() -> None:
    routed = Router(parse("INSERT INTO i SELECT * FROM sensors")).route(
        [record("sensors", 3, 40, NOT_OURS), record("sensors", 3, 41, aggregate("d1", 0))]
    )
    window = int(aggregate("d1", 0)["window_start"].timestamp() * 1000)
    assert [item.id for item in routed.items] == ["sensors/3/40", f"d1|temperature|{window}"]
    assert id_maker("fluxgate", "_") is fluxgate_id
