"""Every panel of deploy/kibana/fluxgate.ndjson asks the stack's real Elasticsearch its search, over
aggregates the es-persister itself wrote (its sink, its default statement, under a target of the
test's own), and gets the data the panel draws: where Vega reads the records, with every field
its drawing takes, and the right numbers. Kibana itself is not run (none can be had here):
its part, turning ``%context%`` into the time range, is ``as_kibana_sends``, from its docs."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fluxgate_testing.aggregates import temperature_aggregate
from fluxgate_testing.sink.items import sink_item
from kibana_objects import OUT, PANELS, Panel

from fluxgate_es_persister.mapping import IndexFamily
from fluxgate_es_persister.settings import ConnectionSettings, EsSinkSettings
from fluxgate_es_persister.sink import ElasticsearchSink
from fluxgate_sink.kcql import Statement, parse

pytestmark = pytest.mark.integration

DAY_ONE = datetime(2021, 5, 6, 23, 58, tzinfo=UTC)  # fixed, far from today: two daily indices
MINUTE = timedelta(minutes=1)
# (device, window start, mean, count, min, max): minute 0 has three devices, minute 1 two, then one.
WINDOWS = [
    ("dev-a", DAY_ONE, 20.0, 2, 19.0, 21.0),
    ("dev-b", DAY_ONE, 23.0, 1, 23.0, 23.0),
    ("dev-c", DAY_ONE, 26.0, 1, 26.0, 26.0),
    ("dev-a", DAY_ONE + MINUTE, 21.0, 3, 20.0, 22.0),
    ("dev-b", DAY_ONE + MINUTE, 24.0, 3, 23.5, 24.5),
    ("dev-a", DAY_ONE + 2 * MINUTE, 22.0, 4, 21.0, 23.0),
    ("dev-a", DAY_ONE + 3 * MINUTE, 18.0, 5, 17.0, 19.5),
]
FROM, TO = "2021-05-06T23:00:00.000Z", "2021-05-07T01:00:00.000Z"
(DEFAULT,) = parse(str(EsSinkSettings.model_fields["kcql"].default))  # the es-persister's statement


def as_kibana_sends(url: Mapping[str, Any], time_from: str, time_to: str) -> tuple[str, dict[str, Any]]:
    """The index and search body Kibana sends for a Vega ``data.url`` on a dashboard without
    filters or query bar text, over [time_from, time_to]: ``%context%`` becomes a query that
    matches everything in the time range of ``%timefield%`` (Kibana's Vega reference, cited in
    tools/kibana_objects.py; a body that has a ``query`` of its own cannot use ``%context%``).
    What a running Kibana really sends is not checked here: no Kibana runs on these machines."""
    body = dict(url["body"])
    assert url.get("%context%") is True and "query" not in body, "a %context% search has no query of its own"
    time_range = {"gte": time_from, "lte": time_to, "format": "strict_date_optional_time"}
    body["query"] = {"bool": {"must": [{"range": {url["%timefield%"]: time_range}}]}}
    return str(url["index"]), body


def panels() -> dict[str, dict[str, Any]]:
    """Each visualization's Vega spec, by title."""
    found = {}
    for line in OUT.read_text().splitlines():
        item = json.loads(line)
        if item["type"] == "visualization":
            found[item["attributes"]["title"]] = json.loads(
                json.loads(item["attributes"]["visState"])["params"]["spec"]
            )
    return found


@pytest.fixture
def statement() -> Statement:
    """The es-persister's default statement, writing to the test's own daily indices."""
    return dataclasses.replace(DEFAULT, target=f"kibana-test-{uuid.uuid4().hex[:8]}")


@pytest.fixture
async def written(elasticsearch: str, statement: Statement) -> AsyncIterator[IndexFamily]:
    """WINDOWS written by the persister's sink; the family of indices they landed in."""
    sink = ElasticsearchSink(ConnectionSettings(hosts=[elasticsearch]))
    family = IndexFamily(statement.target, statement.index_suffix)
    try:
        await sink.setup([statement])
        records = [
            temperature_aggregate(device, start, mean=mean, count=count, min=low, max=high)
            for device, start, mean, count, low, high in WINDOWS
        ]
        items = [sink_item(statement, record, offset) for offset, record in enumerate(records)]
        assert await sink.write_batch(items) == []
        await sink.client.indices.refresh(index=family.wildcard)
        yield family
    finally:
        await sink.client.indices.delete(index=family.wildcard, ignore_unavailable=True, expand_wildcards="all")
        await sink.client.options(ignore_status=404).indices.delete_index_template(name=statement.target)
        await sink.close()


def records_of(spec: dict[str, Any], elasticsearch: str, family: IndexFamily, span: tuple[str, str]) -> list[Any]:
    """What the panel draws: its search as Kibana sends it, on the test's indices instead of the
    persister's (the same pattern, another target), then Vega's ``format.property`` of the answer."""
    index, body = as_kibana_sends(spec["data"]["url"], *span)
    assert index == IndexFamily(DEFAULT.target, DEFAULT.index_suffix).wildcard  # the persister's own
    response = httpx.post(f"{elasticsearch}/{family.wildcard}/_search", json=body, timeout=30)
    assert response.status_code == 200, response.text
    found: Any = response.json()
    for key in spec["data"]["format"]["property"].split("."):
        found = found[key]
    assert isinstance(found, list)
    return found


def value_at(record: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        record = record[key]
    return record


def encoded_fields(spec: Any) -> set[str]:
    """The record fields a Vega-Lite drawing encodes (``field`` under ``encoding``, layers included)."""
    fields: set[str] = set()
    if isinstance(spec, dict):
        for channel in (spec.get("encoding") or {}).values():
            for item in channel if isinstance(channel, list) else [channel]:
                if isinstance(item, dict) and "field" in item:
                    fields.add(item["field"])
        for layer in spec.get("layer", []):
            fields |= encoded_fields(layer)
    return fields


def derived_fields(spec: dict[str, Any]) -> set[str]:
    """Fields the drawing's own transforms make (a row number, a calculation, a fold's key and value)."""
    made: set[str] = set()
    for step in spec.get("transform", []):
        made |= {item["as"] for item in step.get("window", [])}
        made |= {step["as"]} if "calculate" in step else set()
        made |= set(step.get("as", ["key", "value"])) if "fold" in step else set()
    return made


def minute(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@pytest.mark.parametrize("panel", PANELS, ids=lambda panel: panel.id)
async def test_every_panel_finds_records_with_every_field_it_draws(
    elasticsearch: str, written: IndexFamily, panel: Panel
) -> None:
    spec = panels()[panel.title]
    assert encoded_fields(spec) - derived_fields(spec) <= set(panel.reads), panel.id
    records = records_of(spec, elasticsearch, written, (FROM, TO))
    assert records, f"{panel.title}: no records at {spec['data']['format']['property']}"
    for record in records:
        for path in panel.reads:
            assert value_at(record, path) is not None, f"{panel.title}: {path} missing in {record}"


async def test_aggregates_per_minute_counts_each_minutes_windows_and_readings(
    elasticsearch: str, written: IndexFamily
) -> None:
    spec = panels()["Aggregates per minute"]
    buckets = records_of(spec, elasticsearch, written, (FROM, TO))
    assert encoded_fields(spec) <= {"key", "doc_count", "readings.value"}
    assert [(b["key"], b["doc_count"], b["readings"]["value"]) for b in buckets] == [
        (minute(DAY_ONE), 3, 4.0),
        (minute(DAY_ONE + MINUTE), 2, 6.0),
        (minute(DAY_ONE + 2 * MINUTE), 1, 4.0),
        (minute(DAY_ONE + 3 * MINUTE), 1, 5.0),
    ]


async def test_the_dashboards_time_range_limits_every_panel(elasticsearch: str, written: IndexFamily) -> None:
    """%context% with %timefield%: only windows starting in the range, here the second day's."""
    day_two = ("2021-05-07T00:00:00.000Z", TO)
    buckets = records_of(panels()["Aggregates per minute"], elasticsearch, written, day_two)
    assert [(b["key"], b["doc_count"]) for b in buckets] == [
        (minute(DAY_ONE + 2 * MINUTE), 1),
        (minute(DAY_ONE + 3 * MINUTE), 1),
    ]
    rows = records_of(panels()["Newest aggregates"], elasticsearch, written, day_two)
    assert {row["_index"] for row in rows} == {f"{written.target}-2021.05.07"}


async def test_average_temperature_weights_each_window_by_its_readings(
    elasticsearch: str, written: IndexFamily
) -> None:
    spec = panels()["Average temperature"]
    buckets = records_of(spec, elasticsearch, written, (FROM, TO))
    assert encoded_fields(spec) <= {"key", "temperature.value", "lowest.value", "highest.value"}
    for bucket in buckets:
        for field in encoded_fields(spec):
            assert value_at(bucket, field) is not None, field
    drawn = [(b["temperature"]["value"], b["lowest"]["value"], b["highest"]["value"]) for b in buckets]
    # minute 0: (20*2 + 23 + 26) / 4 readings, not the windows' plain mean 23
    assert drawn == [
        (pytest.approx(22.25), 19.0, 26.0),
        (pytest.approx(22.5), 20.0, 24.5),
        (22.0, 21.0, 23.0),
        (18.0, 17.0, 19.5),
    ]


async def test_devices_with_the_most_aggregates_come_first(elasticsearch: str, written: IndexFamily) -> None:
    spec = panels()["Devices with the most aggregates"]
    buckets = records_of(spec, elasticsearch, written, (FROM, TO))
    assert encoded_fields(spec) == {"key", "doc_count"}
    assert [(b["key"], b["doc_count"]) for b in buckets] == [("dev-a", 4), ("dev-b", 2), ("dev-c", 1)]


async def test_newest_aggregates_lists_the_latest_windows_first_from_both_daily_indices(
    elasticsearch: str, written: IndexFamily
) -> None:
    spec = panels()["Newest aggregates"]
    rows = records_of(spec, elasticsearch, written, (FROM, TO))
    assert [(row["_source"]["device_id"], row["_source"]["window_start"]) for row in rows] == [
        (device, start.isoformat()) for device, start, *_ in sorted(WINDOWS, key=lambda w: (-w[1].timestamp(), w[0]))
    ]
    assert {row["_index"] for row in rows} == {f"{written.target}-2021.05.06", f"{written.target}-2021.05.07"}
    calculated = [step["calculate"] for step in spec["transform"] if "calculate" in step]
    for row in rows:
        for expression in calculated:  # each datum._source.<field> a cell shows is in the answer
            field = expression.split("datum._source.", 1)[1].split(",")[0].split(")")[0]
            assert row["_source"][field] is not None, field
