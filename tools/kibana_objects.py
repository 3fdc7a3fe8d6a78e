"""``make kibana-objects``: Kibana saved objects over the es-persister's daily indices, from code.

Writes ``deploy/kibana/fluxgate.ndjson``, which compose's ``kibana-setup`` (profile ``kibana``)
posts to Kibana's import API: a data view over the daily indices, one Vega visualization per
panel and the dashboard that lays them out. A static test keeps the committed file equal to
what this writes; an integration test runs every panel's query on a real Elasticsearch.

The format is the saved-objects import API's: one object a line, each with ``type``, ``id``,
``attributes``, ``references`` and the migration versions the export writes, which a file
made by hand must carry too (https://www.elastic.co/docs/api/kibana/operation/operation-post-saved-objects-import).
A dashboard names its panels through ``references``, never by id in ``panelsJSON``.

Why Vega and plain dicts: each panel's query is an Elasticsearch search body as written here
(https://www.elastic.co/guide/en/kibana/7.10/vega-reference.html, "Writing Elasticsearch
queries in Vega"), so a test can send it to a real node; Lens or aggregation-based panels
keep their query in Kibana's own state, which only a running Kibana turns into a search. The
Kibana libraries on PyPI compile YAML into Lens panels (kb-dashboard-compiler, Python 3.12+)
or are HTTP clients, so there is no library to build these objects with.

    python tools/kibana_objects.py      # write deploy/kibana/fluxgate.ndjson
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fluxgate_es_persister.mapping import IndexFamily
from fluxgate_es_persister.settings import EsSinkSettings
from fluxgate_sink.kcql import EVENT_TIME_FIELDS, parse

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "deploy/kibana/fluxgate.ndjson"
DATA_VIEW_ID = "fluxgate-temperatures"
DASHBOARD_ID = "fluxgate-temperatures-dashboard"
# What Kibana 8.13+ writes on export for these types; an import migrates anything older, and
# refuses only a version newer than its own, so these stay valid for every later 8.x.
CORE_MIGRATION_VERSION = "8.8.0"
TYPE_MIGRATION_VERSION = {"index-pattern": "8.0.0", "visualization": "8.5.0", "dashboard": "8.9.0"}
VEGA_LITE = "https://vega.github.io/schema/vega-lite/v5.json"
GRID_WIDTH = 48  # a dashboard's grid has 48 columns
NEWEST = 20  # rows of the newest-aggregates table


def persister_family() -> IndexFamily:
    """The indices the es-persister writes with its default statement (``temperatures-*``)."""
    (statement,) = parse(str(EsSinkSettings.model_fields["kcql"].default))
    return IndexFamily(statement.target, statement.index_suffix)


TIME_FIELD = EVENT_TIME_FIELDS[0]  # window_start: the event time that names each daily index


@dataclass(frozen=True)
class Panel:
    """One Vega-Lite chart: its search (body and where the records sit in the response) and drawing."""

    id: str
    title: str
    description: str
    body: Mapping[str, Any]
    records: str  # the response's path to the list of records, Vega's format.property
    reads: tuple[str, ...]  # the fields the drawing takes from each record (dotted paths)
    drawing: Mapping[str, Any]  # mark, encoding, transform, layer: everything but data

    def url(self, index: str) -> dict[str, Any]:
        """Vega's ``data.url``: the search, with the dashboard's time range and filters applied."""
        return {"%context%": True, "%timefield%": TIME_FIELD, "index": index, "body": dict(self.body)}

    def spec(self, index: str) -> dict[str, Any]:
        return {
            "$schema": VEGA_LITE,
            "description": self.description,
            "data": {"url": self.url(index), "format": {"property": self.records}},
            **self.drawing,
        }


def per_minute(aggs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A date histogram of one-minute windows (the aggregator's windows under ``make run``)."""
    histogram: dict[str, Any] = {"date_histogram": {"field": TIME_FIELD, "fixed_interval": "1m"}}
    if aggs:
        histogram["aggs"] = dict(aggs)
    return {"size": 0, "aggs": {"per_minute": histogram}}


MINUTE_AXIS = {"field": "key", "type": "temporal", "title": "window start"}

PANELS = (
    Panel(
        id="fluxgate-aggregates-per-minute",
        title="Aggregates per minute",
        description="Aggregates written per window start minute, and the readings they summarise",
        body=per_minute({"readings": {"sum": {"field": "count"}}}),
        records="aggregations.per_minute.buckets",
        reads=("key", "doc_count", "readings.value"),
        drawing={
            "mark": {"type": "bar", "tooltip": True},
            "encoding": {
                "x": MINUTE_AXIS,
                "y": {"field": "doc_count", "type": "quantitative", "title": "aggregates"},
                "tooltip": [
                    {"field": "key", "type": "temporal", "title": "minute", "format": "%Y-%m-%d %H:%M"},
                    {"field": "doc_count", "type": "quantitative", "title": "aggregates"},
                    {"field": "readings.value", "type": "quantitative", "title": "readings"},
                ],
            },
        },
    ),
    Panel(
        id="fluxgate-average-temperature",
        title="Average temperature",
        description="Mean of every reading per minute (each window's mean weighted by its count), "
        "between the lowest and highest reading",
        body=per_minute(
            {
                "temperature": {"weighted_avg": {"value": {"field": "mean"}, "weight": {"field": "count"}}},
                "lowest": {"min": {"field": "min"}},
                "highest": {"max": {"field": "max"}},
            }
        ),
        records="aggregations.per_minute.buckets",
        reads=("key", "temperature.value", "lowest.value", "highest.value"),
        drawing={
            "encoding": {"x": MINUTE_AXIS},
            "layer": [
                {
                    "mark": {"type": "area", "opacity": 0.25},
                    "encoding": {
                        "y": {"field": "lowest.value", "type": "quantitative", "title": "°C"},
                        "y2": {"field": "highest.value"},
                    },
                },
                {
                    "mark": {"type": "line", "point": True, "tooltip": True},
                    "encoding": {"y": {"field": "temperature.value", "type": "quantitative", "title": "°C"}},
                },
            ],
        },
    ),
    Panel(
        id="fluxgate-top-devices",
        title="Devices with the most aggregates",
        description="The ten devices with the most windows in the time range",
        body={"size": 0, "aggs": {"devices": {"terms": {"field": "device_id", "size": 10}}}},
        records="aggregations.devices.buckets",
        reads=("key", "doc_count"),
        drawing={
            "mark": {"type": "bar", "tooltip": True},
            "encoding": {
                "y": {"field": "key", "type": "nominal", "sort": "-x", "title": "device"},
                "x": {"field": "doc_count", "type": "quantitative", "title": "aggregates"},
            },
        },
    ),
    Panel(
        id="fluxgate-newest-aggregates",
        title="Newest aggregates",
        description=f"The {NEWEST} aggregates with the latest window start",
        body={
            "size": NEWEST,
            "sort": [{TIME_FIELD: "desc"}, {"device_id": "asc"}],
            "_source": ["device_id", TIME_FIELD, "mean", "min", "max", "count"],
        },
        records="hits.hits",
        reads=("_source.device_id", f"_source.{TIME_FIELD}", "_source.mean", "_source.count"),
        drawing={
            # A table: one text mark per cell, the columns folded so that the x axis heads them.
            "transform": [
                {"window": [{"op": "row_number", "as": "row"}]},
                {"calculate": "datum._source.device_id", "as": "device"},
                {"calculate": f"datum._source.{TIME_FIELD}", "as": "window start"},
                {"calculate": "format(datum._source.mean, '.2f')", "as": "mean °C"},
                {"calculate": "datum._source.count", "as": "readings"},
                {"fold": ["device", "window start", "mean °C", "readings"]},
            ],
            "mark": {"type": "text"},
            "encoding": {
                "x": {
                    "field": "key",
                    "type": "nominal",
                    "sort": ["device", "window start", "mean °C", "readings"],
                    "axis": {"orient": "top", "title": None, "labelAngle": 0, "domain": False, "ticks": False},
                },
                "y": {"field": "row", "type": "ordinal", "axis": None},
                "text": {"field": "value", "type": "nominal"},
            },
        },
    ),
)


def saved_object(kind: str, object_id: str, attributes: dict[str, Any], references: list[Any]) -> dict[str, Any]:
    return {
        "type": kind,
        "id": object_id,
        "attributes": attributes,
        "references": references,
        "coreMigrationVersion": CORE_MIGRATION_VERSION,
        "typeMigrationVersion": TYPE_MIGRATION_VERSION[kind],
        "managed": False,
    }


def compact(value: Any) -> str:
    """Kibana keeps these attributes as JSON inside a string."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def empty_search() -> dict[str, str]:
    return {"searchSourceJSON": compact({"query": {"query": "", "language": "kuery"}, "filter": []})}


def data_view(family: IndexFamily) -> dict[str, Any]:
    attributes = {
        "title": family.wildcard,
        "name": "Fluxgate temperature aggregates",
        "timeFieldName": TIME_FIELD,
        "allowHidden": False,
        "fields": "[]",
        "fieldAttrs": "{}",
        "fieldFormatMap": "{}",
        "runtimeFieldMap": "{}",
        "sourceFilters": "[]",
    }
    return saved_object("index-pattern", DATA_VIEW_ID, attributes, [])


def visualization(panel: Panel, index: str) -> dict[str, Any]:
    spec = json.dumps(panel.spec(index), ensure_ascii=False, indent=2)
    attributes = {
        "title": panel.title,
        "description": panel.description,
        "visState": compact({"title": panel.title, "type": "vega", "aggs": [], "params": {"spec": spec}}),
        "uiStateJSON": "{}",
        "version": 1,
        "kibanaSavedObjectMeta": empty_search(),
    }
    return saved_object("visualization", panel.id, attributes, [])


def dashboard(panels: tuple[Panel, ...]) -> dict[str, Any]:
    """Two panels a row; each names its visualization by ``panelRefName``, resolved in ``references``."""
    width, height = GRID_WIDTH // 2, 15
    layout, references = [], []
    for number, panel in enumerate(panels):
        index = str(number + 1)
        grid = {"x": (number % 2) * width, "y": (number // 2) * height, "w": width, "h": height, "i": index}
        ref = f"panel_{index}"
        layout.append(
            {
                "type": "visualization",
                "gridData": grid,
                "panelIndex": index,
                "embeddableConfig": {},
                "panelRefName": ref,
            }
        )
        references.append({"type": "visualization", "id": panel.id, "name": f"{index}:{ref}"})
    attributes = {
        "title": "Fluxgate temperatures",
        "description": "The es-persister's daily indices: aggregates per minute, temperature, devices, newest",
        "panelsJSON": compact(layout),
        "optionsJSON": compact({"useMargins": True, "syncColors": False, "hidePanelTitles": False}),
        "timeRestore": True,
        "timeFrom": "now-1h",
        "timeTo": "now",
        "refreshInterval": {"pause": False, "value": 30_000},
        "version": 1,
        "kibanaSavedObjectMeta": empty_search(),
    }
    return saved_object("dashboard", DASHBOARD_ID, attributes, references)


def objects() -> list[dict[str, Any]]:
    """Every saved object, in the order an import creates them (referenced before referencing)."""
    family = persister_family()
    return [data_view(family), *(visualization(panel, family.wildcard) for panel in PANELS), dashboard(PANELS)]


def generated() -> str:
    return "".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in objects())


def write() -> Path:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(generated())
    return OUT


def main() -> int:
    print(write().relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
