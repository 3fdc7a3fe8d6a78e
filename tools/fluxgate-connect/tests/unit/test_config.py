"""Reading a connector config: .properties as java.util.Properties reads it, the REST JSON, ${VAR}."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluxgate_connect.config import expand, load, parse_properties
from fluxgate_connect.errors import ConnectError


def test_properties_take_every_separator_comments_and_continued_lines() -> None:
    text = """
    # a comment
    ! another
    name = coap-source
    tasks.max:1
    connector.class com.example.Connector
    connect.x.kcql=INSERT INTO a \\
        SELECT * FROM b
    escaped\\=key=va\\lue
    empty=
    """
    assert parse_properties(text) == {
        "name": "coap-source",
        "tasks.max": "1",
        "connector.class": "com.example.Connector",
        "connect.x.kcql": "INSERT INTO a SELECT * FROM b",
        "escaped=key": "value",
        "empty": "",
    }


def test_the_rest_json_is_its_config_with_the_name(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"name": "es", "config": {"connector.class": "X", "tasks.max": 2, "flag": true}}')
    assert load(path, {}) == {"connector.class": "X", "tasks.max": "2", "flag": "true", "name": "es"}


def test_placeholders_come_from_the_environment_or_their_default() -> None:
    assert expand("${HOST}:${PORT:-9200}", {"HOST": "es"}, "k") == "es:9200"
    assert expand("${HOST:-x}", {"HOST": ""}, "k") == ""


def test_an_unset_variable_is_an_error_naming_it_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text("connect.elastic.url=${ELASTIC_URL}\n")
    with pytest.raises(ConnectError, match=r"connect\.elastic\.url: \$\{ELASTIC_URL\} is not set"):
        load(path, {})


def test_json_that_is_not_a_connector_config_says_so(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"config": [1, 2]}')
    with pytest.raises(ConnectError, match="expected"):
        load(path, {})
