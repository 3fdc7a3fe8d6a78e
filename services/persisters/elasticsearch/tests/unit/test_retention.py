"""Which indices retention expires: by the date in the name, only names of its own families."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from typing import Any

import pytest

from fluxgate_es_persister.mapping import IndexFamily, index_template
from fluxgate_es_persister.retention import Retention, expired_indices
from fluxgate_es_persister.settings import RetentionSettings

DAILY = IndexFamily("temperatures", "-{YYYY.MM.dd}")
TODAY = date(2026, 11, 23)


def test_older_than_days_by_the_name_date() -> None:
    names = [
        "temperatures-2026.11.23",  # today
        "temperatures-2026.11.22",  # yesterday
        "temperatures-2026.11.16",  # 7 days back: still within
        "temperatures-2026.11.15",  # 8 days back
        "temperatures-2025.01.01",
    ]
    expired = expired_indices(names, [DAILY], TODAY, days=7)
    assert [(e.index, e.dated) for e in expired] == [
        ("temperatures-2025.01.01", date(2025, 1, 1)),
        ("temperatures-2026.11.15", date(2026, 11, 15)),
    ]


@pytest.mark.parametrize(
    "name",
    [
        "temperatures-old-stuff",
        "temperatures-2020.01.01-backup",
        "temperatures-2020.13.01",  # no such month
        "temperatures-2020.1.1",
        "humidity-2020.01.01",
        "xtemperatures-2020.01.01",
        "temperatures",
        ".temperatures-2020.01.01",
    ],
)
def test_names_outside_the_pattern_are_never_expired(name: str) -> None:
    assert expired_indices([name], [DAILY], TODAY, days=1) == []


def test_other_suffix_patterns() -> None:
    family = IndexFamily("agg", "_{yyyy-MM-dd}_v1")
    assert family.wildcard == "agg_*"
    assert family.date_of("agg_2026-11-01_v1") == date(2026, 11, 1)
    assert family.date_of("agg_2026-11-01") is None
    monthly = IndexFamily("agg", "-{YYYY.MM}")
    assert monthly.date_of("agg-2026.11") == date(2026, 11, 1)


def test_an_undated_target_has_no_alias_and_nothing_to_expire() -> None:
    plain = IndexFamily("temperatures")
    assert (plain.daily, plain.wildcard, plain.alias) == (False, "temperatures", None)
    assert expired_indices(["temperatures"], [plain], TODAY, days=1) == []


def test_the_template_matches_the_daily_names_and_declares_the_alias() -> None:
    body = index_template(DAILY, shards=2, replicas=1)
    assert body["index_patterns"] == ["temperatures-*"]
    assert body["template"]["aliases"] == {"temperatures": {}}
    properties = body["template"]["mappings"]["properties"]
    assert properties["window_start"] == {"type": "date"}
    assert properties["mean"] == {"type": "double"}
    assert properties["device_id"] == {"type": "keyword"}
    assert body["template"]["settings"]["index"] == {"number_of_shards": 2, "number_of_replicas": 1}


class FakeIndices:
    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.closed: list[str] = []

    async def delete(self, *, index: str) -> None:
        self.deleted.append(index)

    async def close(self, *, index: str) -> None:
        self.closed.append(index)


class FakeCat:
    def __init__(self, rows: list[dict[str, str]], listed: list[str]) -> None:
        self.rows, self.listed = rows, listed

    async def indices(self, *, index: str, **_: Any) -> Any:
        self.listed.append(index)
        return type("Response", (), {"body": self.rows})()


class FakeClient:
    """``cat.indices`` answers ``rows``; ``indices.delete/close`` are recorded."""

    def __init__(self, rows: list[dict[str, str]]) -> None:
        self.listed: list[str] = []
        self.cat = FakeCat(rows, self.listed)
        self.indices = FakeIndices()


def client_with(rows: list[dict[str, str]]) -> Any:
    return FakeClient(rows)


ROWS = [
    {"index": "temperatures-2026.11.15", "status": "open"},
    {"index": "temperatures-2026.11.14", "status": "close"},
    {"index": "temperatures-2026.11.22", "status": "open"},
    {"index": "temperatures-old-stuff", "status": "open"},
]


def at_noon() -> datetime:
    return datetime(2026, 11, 23, 12, tzinfo=UTC)


async def test_sweep_deletes_only_expired_names() -> None:
    client = client_with(ROWS)
    retention = Retention(client, [DAILY], RetentionSettings(days=7), clock=at_noon)
    await retention.sweep()
    assert client.listed == ["temperatures-*"]
    assert client.indices.deleted == ["temperatures-2026.11.14", "temperatures-2026.11.15"]


async def test_sweep_closes_what_is_still_open() -> None:
    client = client_with(ROWS)
    retention = Retention(client, [DAILY], RetentionSettings(days=7, action="close"), clock=at_noon)
    await retention.sweep()
    assert client.indices.closed == ["temperatures-2026.11.15"]
    assert client.indices.deleted == []


async def test_run_sweeps_until_stopped() -> None:
    client = client_with(ROWS)
    retention = Retention(client, [DAILY], RetentionSettings(days=7, interval_s=0.01), clock=at_noon)
    stop = asyncio.Event()
    task = asyncio.create_task(retention.run(stop))
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 1)
    assert len(client.listed) >= 2
