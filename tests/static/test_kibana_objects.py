"""deploy/kibana/fluxgate.ndjson is what ``make kibana-objects`` (tools/kibana_objects.py) writes,
in the saved-objects import format, over the indices and fields the es-persister really writes;
and compose imports it only under the ``kibana`` profile."""

from __future__ import annotations

import fnmatch
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from charts import LOCAL_BIN, go_binary
from fluxgate_testing.aggregates import temperature_aggregate
from kibana_objects import OUT, PANELS, generated

from fluxgate_es_persister.mapping import TEMPERATURE_AGGREGATE_PROPERTIES
from fluxgate_es_persister.settings import EsSinkSettings
from fluxgate_sink.kcql import Statement, parse

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
KIBANA_SERVICES = {"kibana", "kibana-setup"}


def committed() -> list[dict[str, Any]]:
    return [json.loads(line) for line in OUT.read_text().splitlines()]


def of_type(kind: str) -> list[dict[str, Any]]:
    return [item for item in committed() if item["type"] == kind]


def persister_statement() -> Statement:
    """The es-persister's default statement, read from its Settings (not this environment's)."""
    (statement,) = parse(str(EsSinkSettings.model_fields["kcql"].default))
    return statement


def vega_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for item in of_type("visualization"):
        state = json.loads(item["attributes"]["visState"])
        assert state["type"] == "vega", item["id"]
        yield item["id"], json.loads(state["params"]["spec"])


def test_the_committed_objects_are_what_make_kibana_objects_writes() -> None:
    assert OUT.read_text() == generated(), "deploy/kibana/fluxgate.ndjson is stale: make kibana-objects"


def test_every_line_is_one_saved_object_in_the_import_format() -> None:
    lines = OUT.read_text().splitlines()
    assert lines and all(line.strip() for line in lines)
    for item in committed():
        assert {"type", "id", "attributes", "references", "coreMigrationVersion", "typeMigrationVersion"} <= set(item)
        assert isinstance(item["attributes"], dict) and isinstance(item["references"], list)
        assert item["attributes"]["title"]
        for key in ("visState", "uiStateJSON", "panelsJSON", "optionsJSON"):
            if key in item["attributes"]:
                json.loads(item["attributes"][key])  # Kibana keeps these as JSON in a string
        if "kibanaSavedObjectMeta" in item["attributes"]:
            json.loads(item["attributes"]["kibanaSavedObjectMeta"]["searchSourceJSON"])
    keys = [(item["type"], item["id"]) for item in committed()]
    assert len(keys) == len(set(keys))
    assert [kind for kind, _ in keys].count("index-pattern") == 1
    assert [kind for kind, _ in keys].count("dashboard") == 1


def test_every_dashboard_panel_resolves_through_references_to_an_object_in_the_file() -> None:
    present = {(item["type"], item["id"]) for item in committed()}
    [board] = of_type("dashboard")
    references = {ref["name"]: (ref["type"], ref["id"]) for ref in board["references"]}
    assert len(references) == len(board["references"])
    assert set(references.values()) <= present
    panels = json.loads(board["attributes"]["panelsJSON"])
    named = {f"{panel['panelIndex']}:{panel['panelRefName']}": panel for panel in panels}
    assert set(named) == set(references), "every panel has its reference and every reference a panel"
    for name, panel in named.items():
        assert references[name][0] == panel["type"] == "visualization"
    shown = {reference[1] for reference in references.values()}
    assert shown == {item["id"] for item in of_type("visualization")} == {panel.id for panel in PANELS}


def test_the_data_view_matches_the_daily_indices_the_es_persister_writes() -> None:
    [view] = of_type("index-pattern")
    pattern = view["attributes"]["title"]
    statement = persister_statement()
    for day in (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 11, 27, 23, 59, 59, tzinfo=UTC)):
        assert fnmatch.fnmatchcase(statement.target_for(day), pattern), (statement.target_for(day), pattern)
    assert not fnmatch.fnmatchcase(statement.target, pattern), "the alias is no index: the pattern is the daily ones"
    assert not fnmatch.fnmatchcase("temperatures_late-2026.11.27", pattern)


def test_the_time_field_is_the_date_the_es_persister_names_each_index_by() -> None:
    [view] = of_type("index-pattern")
    time_field = view["attributes"]["timeFieldName"]
    record = temperature_aggregate("d1", datetime(2026, 11, 27, 12, 0, tzinfo=UTC))
    assert persister_statement().event_time_field(record) == time_field
    assert time_field in persister_statement().project(record)
    assert TEMPERATURE_AGGREGATE_PROPERTIES[time_field] == {"type": "date"}


def fields_named(body: Any) -> Iterator[str]:
    """Every document field a search body names: in ``field`` values, sort keys and ``_source``."""
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "field" and isinstance(value, str):
                yield value
            elif key == "sort":
                yield from (name for order in value for name in order)
            elif key == "_source":
                yield from value
            else:
                yield from fields_named(value)
    elif isinstance(body, list):
        for value in body:
            yield from fields_named(value)


def test_every_panel_searches_the_data_view_by_its_time_field_and_names_only_mapped_fields() -> None:
    [view] = of_type("index-pattern")
    for name, spec in vega_specs():
        url = spec["data"]["url"]
        assert url["index"] == view["attributes"]["title"], name
        assert url["%timefield%"] == view["attributes"]["timeFieldName"] and url["%context%"] is True, name
        assert "query" not in url["body"], f"{name}: %context% supplies the query"
        named = set(fields_named(url["body"]))
        assert named and named <= set(TEMPERATURE_AGGREGATE_PROPERTIES), f"{name}: {named}"
        assert spec["$schema"].endswith("/vega-lite/v5.json")


def test_kibana_and_its_import_run_only_under_the_kibana_profile() -> None:
    profiled = {name for name, spec in SERVICES.items() if "kibana" in spec.get("profiles", [])}
    assert profiled == KIBANA_SERVICES  # other profiles (compose's Prometheus: monitoring) aside
    assert all(SERVICES[name]["profiles"] == ["kibana"] for name in profiled)
    for name, spec in SERVICES.items():
        if name not in profiled:
            assert not set(spec.get("depends_on", {})) & profiled, f"{name} would pull in Kibana"


def test_the_setup_posts_the_committed_file_to_the_import_api_once_kibana_is_healthy() -> None:
    spec = SERVICES["kibana-setup"]
    assert spec["depends_on"] == {"kibana": {"condition": "service_healthy"}}
    assert spec["restart"] == "no"
    mounts = dict(volume.split(":")[:2] for volume in spec["volumes"])
    command = " ".join(spec["command"])
    posted = command.split("file=@", 1)[1].split()[0]
    folder = next(target for source, target in mounts.items() if posted.startswith(target + "/"))
    source = {target: source for source, target in mounts.items()}[folder]
    assert (ROOT / source / posted.removeprefix(folder + "/")).resolve() == OUT.resolve()
    assert "-X POST" in command and "-H 'kbn-xsrf: true'" in command
    assert "'http://kibana:5601/api/saved_objects/_import?overwrite=true'" in command
    assert "grep -q '\"success\":true'" in command  # Kibana answers 200 even when an object failed


def compose_services(path: Path) -> list[str]:
    go = go_binary("build tests/static/compose-check")
    binary = LOCAL_BIN / "compose-check"
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=ROOT / "tests/static/compose-check", check=True)
    result = subprocess.run([str(binary), str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.downloads
def test_compose_loads_kibana_only_with_its_profile_and_then_validly(tmp_path: Path) -> None:
    """compose-go, as docker compose loads the file: Kibana is out of a plain ``up``; with the
    profile's services made unconditional, they load too (their dependencies resolve)."""
    assert not set(compose_services(ROOT / "docker-compose.yml")) & KIBANA_SERVICES
    everything = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for spec in everything["services"].values():
        spec.pop("profiles", None)
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(everything, sort_keys=False))
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    assert set(compose_services(tmp_path / "docker-compose.yml")) == set(SERVICES)
