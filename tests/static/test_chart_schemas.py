"""Each chart's `values.schema.json` is what `tools/chart_schemas.py` writes from the
Settings classes, and the value forms it allows are the ones the Settings accept; the
umbrella's `files/topics.json` (its topic Job's list) is what it writes too, and every
setting a chart takes is in `docs/settings.md`; the root README's deploy row names the topic Job
and `secrets.files`, linking to where `deploy/README.md` says more.

A setting added, renamed or retyped then shows up as a change of the schemas in review
(regenerate them: `make chart-schemas`), never as a chart that refuses a real setting or
lets a misspelled one through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from chart_schemas import TOPICS_FILE, leaf_schema, not_starting_with, pipeline_topics, schemas, topics_file
from fluxgate_testing import specs
from pydantic import BaseModel, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict
from settings_reference import SERVICES

ROOT = Path(__file__).resolve().parents[2]


def test_every_charts_schema_is_generated_from_the_settings_classes() -> None:
    for path, text in schemas().items():
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing: make chart-schemas"
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: make chart-schemas"


def test_the_topic_list_is_generated_and_names_every_topic_of_the_pipeline() -> None:
    """files/topics.json, what the umbrella's topic-provisioning Job creates."""
    assert TOPICS_FILE.read_text() == topics_file(), f"{TOPICS_FILE.relative_to(ROOT)} is stale: make chart-schemas"
    assert set(pipeline_topics()) == {
        "sensors.readings", "sensors.deadletter", "temperatures.aggregated", "temperatures.late",
        "devices.status", "persisters.deadletter", "console.replays",
    }  # fmt: skip


def chart_variables(schema: Any) -> Iterator[str]:
    """Every variable a schema takes in a ``config`` or a ``secrets`` block, at any depth (the
    umbrella's topicProvisioning has its own)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "config" and isinstance(value, dict) and "properties" in value:
                yield from value["properties"]
            if key == "secrets" and isinstance(value, dict):
                for block in ("keys", "files"):
                    yield from value["properties"][block].get("properties", {})
            yield from chart_variables(value)


def test_every_setting_a_chart_takes_is_in_the_settings_page() -> None:
    """The services' and the topic-provisioning Job's alike: docs/settings.md lists them (a
    group's own variable, which takes the whole group as JSON, by its fields)."""
    documented = set(re.findall(r"^\| `(FLUXGATE_\w+)` \|", (ROOT / "docs/settings.md").read_text(), re.M))
    groups = {name.rsplit("__", depth)[0] for name in documented for depth in range(1, name.count("__") + 1)}
    taken = {variable for text in schemas().values() for variable in chart_variables(json.loads(text))}
    assert any(variable.startswith("FLUXGATE_TOPICS_") for variable in taken)
    assert taken - documented - groups == set(), "missing from docs/settings.md (tools/settings_reference.py)"


def test_the_readmes_deploy_row_names_the_topic_job_and_the_secret_files_where_deploy_says_more() -> None:
    """Every link of the root README's ``deploy/`` row leads to a file, and to a heading there."""
    [row] = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `deploy/` |")]
    assert "FLUXGATE_TOPICS_" in row and "secrets.files" in row, row
    links = re.findall(r"\]\(([^)#]+)(?:#([^)]+))?\)", row)
    assert ("deploy/README.md", "topics") in links and ("deploy/README.md", "configure") in links, links
    for target, heading in links:
        assert (ROOT / target).is_file(), target
        headings = re.findall(r"^#+ (.+)$", (ROOT / target).read_text(), re.M)
        assert not heading or heading in {re.sub(r"[^\w -]", "", h).lower().replace(" ", "-") for h in headings}


def test_every_chart_has_a_schema() -> None:
    charts = {path.parent for path in (ROOT / "deploy/charts").glob("*/Chart.yaml")}
    assert {path.parent for path in schemas()} == charts


@pytest.mark.parametrize("chart", sorted(SERVICES))
def test_config_names_settings_and_secrets_name_exactly_the_secret_ones(chart: str) -> None:
    """Checked against the deploy checks' own reading of the classes (fluxgate_testing.specs)."""
    schema = json.loads((ROOT / "deploy/charts" / chart / "values.schema.json").read_text())
    config, keys = schema["properties"]["config"], schema["properties"]["secrets"]["properties"]["keys"]
    assert config["additionalProperties"] is False and keys["additionalProperties"] is False
    cls: type[BaseSettings] = SERVICES[chart]
    specs.assert_settings_fields(cls, config["properties"], f"{chart}'s values.schema.json")
    assert set(keys["properties"]) == specs.secret_env_names(cls)
    assert not set(config["properties"]) & specs.secret_env_names(cls), "a secret is never a plain value"


# (annotation, field) -> values: each accepted by the schema exactly when pydantic accepts it.
SAMPLES: list[tuple[Any, FieldInfo, list[Any]]] = [
    (int, Field(1), [3, "3", " 3 ", "1_000", "3.0", "-2", "3.5", "abc", "", True]),
    (int, Field(1, ge=1, le=10), [0, 1, 10, 11]),
    (float, Field(1.0), [1.5, 2, "1.5", "1e3", ".5", "inf", "-Infinity", "nan", "1.5s", "", "abc"]),
    (bool, Field(False), [True, "true", "False", "YES", "off", "1", "0", "t", "maybe", "", 1]),
    (Literal["a", "b"], Field("a"), ["a", "b", "A", "c"]),
    (str | None, Field(None), ["x", ""]),
]


@pytest.mark.parametrize(("annotation", "info", "values"), SAMPLES)
def test_the_schema_accepts_what_the_settings_accept(
    annotation: Any, info: FieldInfo, values: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each value as YAML gives it (text, a number, a boolean), rendered as the chart renders
    it into the environment, then read by a Settings class as a setting of a group."""
    group = create_model("Group", v=(annotation, info))
    settings = _settings(group)
    schema = leaf_schema(annotation, info)
    for value in values:
        monkeypatch.setenv("T_G__V", rendered(value))
        try:
            settings()
            settings_accept = True
        except ValidationError:
            settings_accept = False
        schema_accepts = jsonschema.Draft7Validator(schema).is_valid(value)
        assert schema_accepts == settings_accept, f"{annotation} {value!r}: schema {schema_accepts}"


@pytest.mark.parametrize(
    ("chart", "variable", "values"),
    [("mqtt-proxy", "FLUXGATE_MQTT_MQTT__PROTOCOL_VERSION", [4, 5, "4", "5", 6, "6", "x"]),
     ("es-persister", "FLUXGATE_ES_SINK__BATCH_SIZE", [500, "500", 0, "x"])],
)  # fmt: skip  # bounds hold for numbers; of text only its form is checked ("0" passes, the service refuses it)
def test_a_services_own_setting_is_checked_as_its_settings_check_it(
    chart: str, variable: str, values: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = SERVICES[chart]
    schema = json.loads((ROOT / "deploy/charts" / chart / "values.schema.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    for value in values:
        monkeypatch.setenv(variable, rendered(value))
        try:
            cls()
            settings_accept = True
        except ValidationError:
            settings_accept = False
        schema_accepts = validator.is_valid({"config": {variable: value}})
        assert schema_accepts == settings_accept, f"{variable}={value!r}: schema {schema_accepts}"


def _settings(group: type[BaseModel]) -> type[BaseSettings]:
    class Settings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="T_", env_nested_delimiter="__")
        g: group = Field(default_factory=group)  # type: ignore[valid-type]

    return Settings


def rendered(value: Any) -> str:
    """The environment text fluxgate-lib's "fluxgate.envValue" makes of a value."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value == int(value):
        return str(int(value))
    return json.dumps(value)


@pytest.mark.parametrize("prefix", ["FLUXGATE_ES_", "FLUXGATE_CONSOLE_"])
def test_another_services_variable_is_left_to_the_charts_own_check(prefix: str) -> None:
    """Names under the prefix are closed (a misspelling fails at the schema); any other name
    reaches the chart's template, which refuses it naming the prefix."""
    pattern = re.compile(not_starting_with(prefix))
    for other in ("FLUXGATE_HZ_SINK__KCQL", "ES_X", "FLUXGATE_E", "", "fluxgate_es_x"):
        assert pattern.search(other), other
    for own in (prefix, prefix + "SINK__GROUPID"):
        assert not pattern.search(own), own
